package io.rdmaplane.spark.registry;

/** The registry did not accept a REGISTER: the executor id is bound to another registrant. */
public final class RegistrationRefusedException extends Exception {
    public RegistrationRefusedException(String reason) {
        super(reason);
    }
}
