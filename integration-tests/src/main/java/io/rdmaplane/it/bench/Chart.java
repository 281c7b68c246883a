package io.rdmaplane.it.bench;

import java.awt.BasicStroke;
import java.awt.Color;
import java.awt.Font;
import java.awt.Graphics2D;
import java.awt.RenderingHints;
import java.awt.image.BufferedImage;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;
import javax.imageio.ImageIO;

/**
 * A line chart written as PNG with java.awt (headless): one line per series over shared x labels,
 * optionally on a log scale. Enough for a benchmark's curves; no charting dependency.
 */
final class Chart {
    private static final int WIDTH = 900;
    private static final int HEIGHT = 540;
    private static final int LEFT = 90;
    private static final int RIGHT = 180;
    private static final int TOP = 50;
    private static final int BOTTOM = 60;
    private static final Color[] COLORS = {new Color(0x1f77b4), new Color(0xff7f0e), new Color(0x2ca02c),
            new Color(0xd62728), new Color(0x9467bd), new Color(0x8c564b), new Color(0xe377c2), new Color(0x7f7f7f)};

    private final String title;
    private final String yLabel;
    private final String[] xLabels;
    private final boolean logY;
    private final Map<String, double[]> series = new LinkedHashMap<>();

    Chart(String title, String yLabel, String[] xLabels, boolean logY) {
        this.title = title;
        this.yLabel = yLabel;
        this.xLabels = xLabels.clone();
        this.logY = logY;
    }

    /** A line; NaN values are left out. */
    Chart line(String name, double[] values) {
        series.put(name, values.clone());
        return this;
    }

    void write(Path file) throws IOException {
        System.setProperty("java.awt.headless", "true");
        double min = Double.MAX_VALUE;
        double max = -Double.MAX_VALUE;
        for (double[] values : series.values()) {
            for (double v : values) {
                if (!Double.isNaN(v) && (!logY || v > 0)) {
                    min = Math.min(min, v);
                    max = Math.max(max, v);
                }
            }
        }
        if (min > max) {
            min = 0;
            max = 1;
        }
        double lo = logY ? Math.floor(Math.log10(min)) : 0;
        double hi = logY ? Math.ceil(Math.log10(max)) : max * 1.1;
        if (hi <= lo) {
            hi = lo + 1;
        }
        BufferedImage image = new BufferedImage(WIDTH, HEIGHT, BufferedImage.TYPE_INT_RGB);
        Graphics2D g = image.createGraphics();
        g.setRenderingHint(RenderingHints.KEY_ANTIALIASING, RenderingHints.VALUE_ANTIALIAS_ON);
        g.setColor(Color.WHITE);
        g.fillRect(0, 0, WIDTH, HEIGHT);
        g.setColor(Color.BLACK);
        g.setFont(new Font(Font.SANS_SERIF, Font.BOLD, 15));
        g.drawString(title, LEFT, 28);
        g.setFont(new Font(Font.SANS_SERIF, Font.PLAIN, 12));
        int plotW = WIDTH - LEFT - RIGHT;
        int plotH = HEIGHT - TOP - BOTTOM;
        g.drawRect(LEFT, TOP, plotW, plotH);
        int ticks = logY ? (int) (hi - lo) : 5;
        for (int i = 0; i <= ticks; i++) {
            int y = TOP + plotH - i * plotH / ticks;
            double value = logY ? Math.pow(10, lo + i) : hi * i / ticks;
            g.setColor(new Color(0xdddddd));
            g.drawLine(LEFT + 1, y, LEFT + plotW - 1, y);
            g.setColor(Color.BLACK);
            g.drawString(format(value), 8, y + 4);
        }
        for (int i = 0; i < xLabels.length; i++) {
            g.drawString(xLabels[i], x(i, plotW) - 8, TOP + plotH + 18);
        }
        g.drawString(yLabel, 8, TOP - 10);
        int legend = 0;
        for (Map.Entry<String, double[]> e : series.entrySet()) {
            Color color = COLORS[legend % COLORS.length];
            g.setColor(color);
            g.setStroke(new BasicStroke(2f));
            double[] values = e.getValue();
            int px = -1;
            int py = -1;
            for (int i = 0; i < values.length && i < xLabels.length; i++) {
                if (Double.isNaN(values[i]) || (logY && values[i] <= 0)) {
                    px = -1;
                    continue;
                }
                double t = logY ? (Math.log10(values[i]) - lo) / (hi - lo) : values[i] / hi;
                int x = x(i, plotW);
                int y = TOP + plotH - (int) Math.round(t * plotH);
                g.fillOval(x - 3, y - 3, 6, 6);
                if (px >= 0) {
                    g.drawLine(px, py, x, y);
                }
                px = x;
                py = y;
            }
            int ly = TOP + 10 + legend * 20;
            g.drawLine(LEFT + plotW + 15, ly, LEFT + plotW + 40, ly);
            g.setColor(Color.BLACK);
            g.drawString(e.getKey(), LEFT + plotW + 46, ly + 4);
            legend++;
        }
        g.dispose();
        Files.createDirectories(file.toAbsolutePath().getParent());
        ImageIO.write(image, "png", file.toFile());
    }

    private int x(int i, int plotW) {
        return LEFT + (xLabels.length == 1 ? plotW / 2 : 20 + i * (plotW - 40) / (xLabels.length - 1));
    }

    private static String format(double v) {
        if (v >= 1e6) {
            return String.format("%.0fM", v / 1e6);
        }
        if (v >= 1e3) {
            return String.format("%.0fk", v / 1e3);
        }
        return v >= 10 || v == 0 ? String.format("%.0f", v) : String.format("%.2g", v);
    }
}
