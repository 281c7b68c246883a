package io.rdmaplane.rdma.provider.verbs;

import java.io.IOException;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.net.URL;
import java.nio.file.Path;
import java.util.Collections;
import java.util.Enumeration;

/** Runs checks written against DiSNI's API inside DisniRuntime's loader, and fake parents. */
final class DisniTestSupport {

    private DisniTestSupport() {
    }

    /**
     * Calls the public static method {@code method} of {@code className} (a class of the impl
     * package, defined by DisniRuntime's loader) and rethrows what it throws.
     */
    static Object call(String className, String method, Object... args) throws Exception {
        Class<?> type = Class.forName(className, true, DisniRuntime.loader());
        for (Method m : type.getMethods()) {
            if (m.getName().equals(method) && m.getParameterCount() == args.length) {
                try {
                    return m.invoke(null, args);
                } catch (InvocationTargetException e) {
                    Throwable cause = e.getCause();
                    if (cause instanceof Exception) {
                        throw (Exception) cause;
                    }
                    if (cause instanceof Error) {
                        throw (Error) cause;
                    }
                    throw e;
                }
            }
        }
        throw new NoSuchMethodException(className + "." + method + " with " + args.length + " arguments");
    }

    /** A parent that sees this class path except the bundled native libraries. */
    static ClassLoader withoutNativeResources() {
        return new ClassLoader("no-native", DisniTestSupport.class.getClassLoader()) {
            @Override
            public URL getResource(String name) {
                return name.startsWith("native/") ? null : super.getResource(name);
            }

            @Override
            public Enumeration<URL> getResources(String name) throws IOException {
                return name.startsWith("native/") ? Collections.emptyEnumeration() : super.getResources(name);
            }
        };
    }

    /** A parent that sees this class path, with {@code library} as the bundled native library. */
    static ClassLoader withNativeResource(String platform, Path library) {
        String resource = "native/" + platform + "/libdisni.so";
        return new ClassLoader("fake-native", DisniTestSupport.class.getClassLoader()) {
            @Override
            public URL getResource(String name) {
                if (name.equals(resource)) {
                    try {
                        return library.toUri().toURL();
                    } catch (IOException e) {
                        throw new IllegalStateException(e);
                    }
                }
                return name.startsWith("native/") ? null : super.getResource(name);
            }
        };
    }
}
