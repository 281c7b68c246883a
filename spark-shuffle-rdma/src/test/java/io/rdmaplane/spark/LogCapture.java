package io.rdmaplane.spark;

import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import org.apache.logging.log4j.LogManager;
import org.apache.logging.log4j.core.LogEvent;
import org.apache.logging.log4j.core.LoggerContext;
import org.apache.logging.log4j.core.appender.AbstractAppender;
import org.apache.logging.log4j.core.config.Property;

/** Collects the lines one logger writes (Spark's tests log through log4j2), as "LEVEL message". */
public final class LogCapture extends AbstractAppender implements AutoCloseable {
    private final List<String> lines = new CopyOnWriteArrayList<>();
    private final org.apache.logging.log4j.core.Logger logger;

    public LogCapture(Class<?> source) {
        super("capture-" + source.getSimpleName(), null, null, true, Property.EMPTY_ARRAY);
        LoggerContext context = (LoggerContext) LogManager.getContext(false);
        logger = context.getLogger(source.getName());
        start();
        logger.addAppender(this);
    }

    @Override
    public void append(LogEvent event) {
        lines.add(event.getLevel() + " " + event.getMessage().getFormattedMessage());
    }

    public List<String> lines(String level) {
        return lines.stream().filter(l -> l.startsWith(level + " ")).toList();
    }

    @Override
    public void close() {
        logger.removeAppender(this);
        stop();
    }
}
