package io.rdmaplane.spark.registry;

import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;

/**
 * The registry's control messages (big-endian; the policy layer CRC-checks every frame):
 * REGISTER = byte 1, UTF executorId, UTF host, int port (answered by an empty response);
 * LOOKUP = byte 2, UTF executorId (answered by byte found, then if found UTF host, int port).
 * A UTF is an unsigned short byte count and that many UTF-8 bytes. Decoders check every length
 * against the bytes left and throw {@link IllegalArgumentException} naming the field.
 */
public final class RegistryProtocol {
    public static final byte REGISTER = 1;
    public static final byte LOOKUP = 2;
    private static final int MAX_UTF_BYTES = 0xFFFF;

    /** A decoded request: REGISTER carries an address, LOOKUP does not. */
    public record Request(byte type, String executorId, String host, int port) {
        public InetSocketAddress address() {
            return InetSocketAddress.createUnresolved(host, port);
        }
    }

    private RegistryProtocol() {
    }

    public static ByteBuffer register(String executorId, String host, int port) {
        byte[] id = utf(executorId, "executorId");
        byte[] h = utf(host, "host");
        ByteBuffer out = ByteBuffer.allocate(1 + 2 + id.length + 2 + h.length + 4);
        out.put(REGISTER).putShort((short) id.length).put(id).putShort((short) h.length).put(h).putInt(port);
        return out.flip();
    }

    public static ByteBuffer lookup(String executorId) {
        byte[] id = utf(executorId, "executorId");
        return ByteBuffer.allocate(1 + 2 + id.length).put(LOOKUP).putShort((short) id.length).put(id).flip();
    }

    public static Request decodeRequest(ByteBuffer in) {
        ByteBuffer b = in.duplicate();
        need(b, 1, "type");
        byte type = b.get();
        String id = readUtf(b, "executorId");
        Request request;
        if (type == REGISTER) {
            String host = readUtf(b, "host");
            need(b, 4, "port");
            int port = b.getInt();
            if (port < 0 || port > 65535) {
                throw new IllegalArgumentException("port out of range: " + port);
            }
            request = new Request(type, id, host, port);
        } else if (type == LOOKUP) {
            request = new Request(type, id, null, -1);
        } else {
            throw new IllegalArgumentException("type: unknown registry request type " + type);
        }
        if (b.hasRemaining()) {
            throw new IllegalArgumentException("trailing: " + b.remaining() + " bytes after the request");
        }
        return request;
    }

    /** The answer to a LOOKUP: null for not found. */
    public static ByteBuffer lookupAnswer(String host, int port) {
        if (host == null) {
            return ByteBuffer.allocate(1).put((byte) 0).flip();
        }
        byte[] h = utf(host, "host");
        return ByteBuffer.allocate(1 + 2 + h.length + 4).put((byte) 1).putShort((short) h.length).put(h).putInt(port).flip();
    }

    /** Decodes a LOOKUP answer: the address (unresolved), or null when the executor is not registered. */
    public static InetSocketAddress decodeLookupAnswer(ByteBuffer in) {
        ByteBuffer b = in.duplicate();
        need(b, 1, "found");
        byte found = b.get();
        if (found == 0) {
            if (b.hasRemaining()) {
                throw new IllegalArgumentException("trailing: " + b.remaining() + " bytes after a not-found answer");
            }
            return null;
        }
        if (found != 1) {
            throw new IllegalArgumentException("found: expected 0 or 1, was " + found);
        }
        String host = readUtf(b, "host");
        need(b, 4, "port");
        int port = b.getInt();
        if (port < 0 || port > 65535) {
            throw new IllegalArgumentException("port out of range: " + port);
        }
        if (b.hasRemaining()) {
            throw new IllegalArgumentException("trailing: " + b.remaining() + " bytes after the answer");
        }
        return InetSocketAddress.createUnresolved(host, port);
    }

    private static byte[] utf(String s, String field) {
        byte[] bytes = s.getBytes(StandardCharsets.UTF_8);
        if (bytes.length > MAX_UTF_BYTES) {
            throw new IllegalArgumentException(field + " is longer than " + MAX_UTF_BYTES + " bytes");
        }
        return bytes;
    }

    private static String readUtf(ByteBuffer b, String field) {
        need(b, 2, field + " length");
        int length = Short.toUnsignedInt(b.getShort());
        need(b, length, field);
        byte[] bytes = new byte[length];
        b.get(bytes);
        return new String(bytes, StandardCharsets.UTF_8);
    }

    private static void need(ByteBuffer b, int bytes, String field) {
        if (b.remaining() < bytes) {
            throw new IllegalArgumentException(field + ": needs " + bytes + " bytes, " + b.remaining() + " left");
        }
    }
}
