package io.rdmaplane.rdma.codec;

import java.util.EnumMap;
import java.util.Map;
import java.util.StringJoiner;
import java.util.function.ToIntFunction;

/**
 * The explicit one-byte wire ids of an enum's constants, so reordering or renaming a constant
 * never changes the protocol (an ordinal would). Built once per enum; an id outside 0..255 or
 * one given twice is refused when the table is built, that is when its protocol class loads.
 */
public final class WireIds<E extends Enum<E>> {
    private final String what;
    private final Map<E, Integer> ids;
    @SuppressWarnings("unchecked")
    private final E[] byId = (E[]) new Enum<?>[256];

    private WireIds(Class<E> type, String what, ToIntFunction<E> wireId) {
        this.what = what;
        this.ids = new EnumMap<>(type);
        for (E constant : type.getEnumConstants()) {
            int id = wireId.applyAsInt(constant);
            if (id < 0 || id > 255) {
                throw new IllegalArgumentException(what + " " + constant + ": wire id " + id + " is not in 0..255");
            }
            if (byId[id] != null) {
                throw new IllegalArgumentException(what + " " + constant + ": wire id " + id + " is " + byId[id] + "'s already");
            }
            byId[id] = constant;
            ids.put(constant, id);
        }
    }

    /**
     * @param what   what the constants are, for error messages ("control message", "traffic class")
     * @param wireId each constant's id: write it as an exhaustive switch, so a new constant does not compile without one
     */
    public static <E extends Enum<E>> WireIds<E> of(Class<E> type, String what, ToIntFunction<E> wireId) {
        return new WireIds<>(type, what, wireId);
    }

    public int id(E constant) {
        return ids.get(constant);
    }

    /**
     * The constant with wire id {@code id}.
     *
     * @throws MalformedMessageException naming {@code field}, the id and the ids this build knows
     */
    public E decode(String field, int id) {
        E constant = id >= 0 && id < byId.length ? byId[id] : null;
        if (constant == null) {
            throw new MalformedMessageException(field + ": unknown " + what + " id " + id + " (this build knows " + known() + ")");
        }
        return constant;
    }

    String what() {
        return what;
    }

    /** {@code HELLO=1, CHALLENGE=2, ...}, in id order. */
    public String known() {
        StringJoiner all = new StringJoiner(", ");
        for (int id = 0; id < byId.length; id++) {
            if (byId[id] != null) {
                all.add(byId[id] + "=" + id);
            }
        }
        return all.toString();
    }
}
