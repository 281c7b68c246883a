package io.rdmaplane.hdfs.datanode;

/**
 * The CRC32C of a concatenation from the CRC32Cs of its parts, without the bytes: a CRC is
 * linear over GF(2), so appending n bytes to a message maps its CRC through a fixed 32x32 bit
 * matrix (the effect of n zero bytes on the CRC register), and crc(AB) = shift_n(crc(A)) xor crc(B)
 * for n = |B| (the pre- and post-inversion cancel out). The DataNode uses it to give the range
 * CRC32C from the replica's stored chunk CRC32Cs, so it never reads the block's bytes itself.
 * A matrix is 32 ints: element i is the image of bit i.
 */
final class Crc32cConcat {
    /** CRC32C (Castagnoli) polynomial, bit-reflected, as java.util.zip.CRC32C uses it. */
    private static final int POLY = 0x82F63B78;
    private static final int[] ONE_BYTE = oneByte();

    private Crc32cConcat() {
    }

    /** The matrix that appends {@code length} zero bytes to the CRC register. */
    static int[] shift(long length) {
        int[] result = identity();
        int[] power = ONE_BYTE.clone();
        for (long n = length; n > 0; n >>>= 1) {
            if ((n & 1) != 0) {
                result = compose(power, result);
            }
            power = compose(power, power);
        }
        return result;
    }

    /** crc(AB) from crc(A), crc(B) and the {@link #shift} matrix of |B|. */
    static int concat(int crcA, int crcB, int[] shiftOfB) {
        return times(shiftOfB, crcA) ^ crcB;
    }

    private static int times(int[] matrix, int vector) {
        int sum = 0;
        for (int i = 0; vector != 0; i++, vector >>>= 1) {
            if ((vector & 1) != 0) {
                sum ^= matrix[i];
            }
        }
        return sum;
    }

    /** outer after inner. */
    private static int[] compose(int[] outer, int[] inner) {
        int[] out = new int[32];
        for (int i = 0; i < 32; i++) {
            out[i] = times(outer, inner[i]);
        }
        return out;
    }

    private static int[] identity() {
        int[] m = new int[32];
        for (int i = 0; i < 32; i++) {
            m[i] = 1 << i;
        }
        return m;
    }

    /** One zero bit shifts the reflected register right, folding the polynomial in when bit 0 falls out; then 8 of them. */
    private static int[] oneByte() {
        int[] bit = new int[32];
        bit[0] = POLY;
        for (int i = 1; i < 32; i++) {
            bit[i] = 1 << (i - 1);
        }
        int[] m = bit;
        for (int i = 0; i < 3; i++) {
            m = compose(m, m); // 2, 4, 8 bits
        }
        return m;
    }
}
