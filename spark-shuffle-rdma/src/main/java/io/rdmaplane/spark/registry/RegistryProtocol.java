package io.rdmaplane.spark.registry;

import io.rdmaplane.rdma.codec.MalformedMessageException;
import io.rdmaplane.rdma.codec.MessageReader;
import io.rdmaplane.rdma.codec.MessageWriter;
import io.rdmaplane.rdma.codec.Protocol;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;

/**
 * The registry's control messages, in the shared codec ({@code version:u8 type:u8} then the
 * fields, big-endian; the policy layer CRC-checks every frame): REGISTER {@code string executorId,
 * string host, int port}, answered by REGISTERED (no fields) or REFUSED {@code string reason} (the
 * id is bound to another registrant); LOOKUP {@code string executorId},
 * answered by LOOKUP_ANSWER {@code bool found}, then if found {@code string host, int port}, or by
 * REMOVED (no fields: Spark removed that executor, so nothing serves at its old address).
 * A string is a u16 byte count and that many bytes of UTF-8, at most {@value #MAX_STRING_BYTES}
 * ({@value #MAX_REASON_BYTES} for a reason).
 * Decoders check every length against its bound and the bytes left and throw
 * {@link MalformedMessageException} naming the field.
 */
public final class RegistryProtocol {
    /** 2: the first on the shared codec; 3: REFUSED; 4: REMOVED. */
    public static final int VERSION = 4;
    /** The longest executor id or host name a message carries. */
    public static final int MAX_STRING_BYTES = 1024;
    /** The longest reason a REFUSED carries. */
    public static final int MAX_REASON_BYTES = 4096;

    public enum Type {
        REGISTER(0x20),
        REGISTERED(0x21),
        LOOKUP(0x22),
        LOOKUP_ANSWER(0x23),
        REFUSED(0x24),
        REMOVED(0x25);

        private final int wireId;

        Type(int wireId) {
            this.wireId = wireId;
        }

        public int wireId() {
            return wireId;
        }
    }

    public static final Protocol<Type> PROTOCOL = Protocol.of("registry", VERSION, Type.class, Type::wireId);

    /** A decoded request: REGISTER carries an address, LOOKUP does not. */
    public record Request(Type type, String executorId, String host, int port) {
        public InetSocketAddress address() {
            return InetSocketAddress.createUnresolved(host, port);
        }
    }

    private RegistryProtocol() {
    }

    public static ByteBuffer register(String executorId, String host, int port) {
        return PROTOCOL.write(Type.REGISTER).string("executorId", executorId, MAX_STRING_BYTES)
                .string("host", host, MAX_STRING_BYTES).i32(port).finish();
    }

    public static ByteBuffer lookup(String executorId) {
        return PROTOCOL.write(Type.LOOKUP).string("executorId", executorId, MAX_STRING_BYTES).finish();
    }

    /** @throws MalformedMessageException naming the field that is malformed */
    public static Request decodeRequest(ByteBuffer in) {
        MessageReader<Type> r = PROTOCOL.read(in);
        Request request = switch (r.type()) {
            case REGISTER -> new Request(Type.REGISTER, r.string("executorId", MAX_STRING_BYTES), r.string("host", MAX_STRING_BYTES),
                    port(r));
            case LOOKUP -> new Request(Type.LOOKUP, r.string("executorId", MAX_STRING_BYTES), null, -1);
            default -> throw r.malformed("type", "a " + r.type() + " is an answer, not a registry request");
        };
        r.end();
        return request;
    }

    /** The answer to a REGISTER. */
    public static ByteBuffer registered() {
        return PROTOCOL.write(Type.REGISTERED).finish();
    }

    /** The answer to a REGISTER that the registry does not accept, saying why (cut to {@value #MAX_REASON_BYTES} bytes). */
    public static ByteBuffer refused(String reason) {
        byte[] utf8 = reason.getBytes(java.nio.charset.StandardCharsets.UTF_8);
        String bounded = utf8.length <= MAX_REASON_BYTES ? reason
                : new String(utf8, 0, MAX_REASON_BYTES - 3, java.nio.charset.StandardCharsets.UTF_8).replace("\uFFFD", "") + "...";
        return PROTOCOL.write(Type.REFUSED).string("reason", bounded, MAX_REASON_BYTES).finish();
    }

    /**
     * Checks that {@code in} is the answer to a REGISTER that was accepted.
     *
     * @throws RegistrationRefusedException when the registry refused it, with its reason
     * @throws MalformedMessageException    naming the field that is malformed
     */
    public static void decodeRegistered(ByteBuffer in) throws RegistrationRefusedException {
        MessageReader<Type> r = PROTOCOL.read(in);
        switch (r.type()) {
            case REGISTERED -> r.end();
            case REFUSED -> {
                String reason = r.string("reason", MAX_REASON_BYTES);
                r.end();
                throw new RegistrationRefusedException(reason);
            }
            default -> throw r.malformed("type", "expected a registry REGISTERED or REFUSED message, was " + r.type());
        }
    }

    /** The answer to a LOOKUP: null for not found. */
    public static ByteBuffer lookupAnswer(String host, int port) {
        MessageWriter out = PROTOCOL.write(Type.LOOKUP_ANSWER).bool(host != null);
        if (host != null) {
            out.string("host", host, MAX_STRING_BYTES).i32(port);
        }
        return out.finish();
    }

    /** The answer to a LOOKUP of an executor Spark removed. */
    public static ByteBuffer removed() {
        return PROTOCOL.write(Type.REMOVED).finish();
    }

    /** What a LOOKUP found: an address (unresolved), or none, with {@code removed} when Spark removed the executor. */
    public record Lookup(InetSocketAddress address, boolean removed) {
        static final Lookup UNKNOWN = new Lookup(null, false);
        static final Lookup GONE = new Lookup(null, true);
    }

    /**
     * Decodes the answer to a LOOKUP (LOOKUP_ANSWER or REMOVED).
     *
     * @throws MalformedMessageException naming the field that is malformed
     */
    public static Lookup decodeLookupAnswer(ByteBuffer in) {
        MessageReader<Type> r = PROTOCOL.read(in);
        Lookup lookup = switch (r.type()) {
            case LOOKUP_ANSWER -> r.bool("found")
                    ? new Lookup(InetSocketAddress.createUnresolved(r.string("host", MAX_STRING_BYTES), port(r)), false)
                    : Lookup.UNKNOWN;
            case REMOVED -> Lookup.GONE;
            default -> throw r.malformed("type", "expected a registry LOOKUP_ANSWER message, was " + r.type());
        };
        r.end();
        return lookup;
    }

    private static int port(MessageReader<Type> r) {
        int port = r.i32("port");
        if (port < 0 || port > 65535) {
            throw r.malformed("port", "out of range: " + port);
        }
        return port;
    }
}
