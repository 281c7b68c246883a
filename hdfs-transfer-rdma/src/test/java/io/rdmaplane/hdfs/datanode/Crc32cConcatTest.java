package io.rdmaplane.hdfs.datanode;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.Random;
import java.util.zip.CRC32C;
import org.junit.jupiter.api.Test;

class Crc32cConcatTest {
    private static int crc(byte[] b, int from, int length) {
        CRC32C c = new CRC32C();
        c.update(b, from, length);
        return (int) c.getValue();
    }

    @Test
    void chunkCrcsConcatenateToTheCrcOfTheWhole() {
        Random random = new Random(5);
        for (int bpc : new int[] {1, 7, 512, 4096}) {
            for (int size : new int[] {1, bpc - 1, bpc, bpc + 1, 10 * bpc + 3, 100_000}) {
                if (size < 1) {
                    continue;
                }
                byte[] data = new byte[size];
                random.nextBytes(data);
                int[] full = Crc32cConcat.shift(bpc);
                int combined = crc(data, 0, Math.min(bpc, size));
                for (int from = bpc; from < size; from += bpc) {
                    int length = Math.min(bpc, size - from);
                    combined = Crc32cConcat.concat(combined, crc(data, from, length),
                            length == bpc ? full : Crc32cConcat.shift(length));
                }
                assertEquals(crc(data, 0, size), combined, "bpc " + bpc + ", size " + size);
            }
        }
    }

    @Test
    void emptySuffixChangesNothing() {
        assertEquals(0x12345678, Crc32cConcat.concat(0x12345678, 0, Crc32cConcat.shift(0)));
    }
}
