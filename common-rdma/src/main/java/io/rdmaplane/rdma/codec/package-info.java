/**
 * The one codec every control message of the project is written in: the policy layer's frames
 * and handshake, the doctor's peer check, Spark's LOCATE and registry messages and the HDFS
 * block messages. It depends on nothing else of the project (a layer test holds that), so
 * policy, doctor and the adapters can all use it.
 *
 * <p>A message is {@code version:u8 type:u8} and its fields, big-endian; a message that travels
 * on its own (a control frame, the doctor's) ends with a CRC32C of everything before it, while
 * one carried inside a control frame relies on the frame's. The decoder checks the CRC32C, then
 * the version ("unsupported locate version 3, this build speaks 2"), then the message id, and
 * bounds every length from the wire before it allocates; whatever is wrong is a
 * {@link io.rdmaplane.rdma.codec.MalformedMessageException} naming the field. Message types and
 * enum values go on the wire by explicit ids ({@link io.rdmaplane.rdma.codec.WireIds}), never
 * by ordinal. Strings are {@code u16} byte counts and UTF-8 (each with its own bound); a remote
 * block is {@code address:i64 rkey:i32 length:i32 crc32c:i32} and the caller maps it to its own
 * type, so the codec needs none.
 *
 * <p>Message ids (distinct across protocols, so a message sent to the wrong service is refused
 * by id):
 * <pre>
 * protocol (version)   class                        ids
 * control (3)          policy.ControlFrame          HELLO 0x01, CHALLENGE 0x02, PROOF 0x03, READY 0x04, REJECT 0x05,
 *                                                   REQUEST 0x06, RESPONSE 0x07, ERROR 0x08, PING 0x09, PONG 0x0A, UNBOUND 0x0B
 * locate (2)           spark.serve.LocateProtocol   LOCATE 0x10, LOCATED 0x11
 * registry (3)         spark.registry.RegistryProtocol  REGISTER 0x20, REGISTERED 0x21, LOOKUP 0x22, LOOKUP_ANSWER 0x23, REFUSED 0x24
 * hdfs-block (2)       hdfs.BlockProtocol           BLOCK_REQUEST 0x30, BLOCK_RESPONSE 0x31
 * doctor (2)           doctor.PeerCheck             DESCRIBE 0x40, DESCRIPTOR 0x41
 * </pre>
 * Field values by id: the HELLO's traffic class (CONTROL 1, DATA 2) and the HDFS block status
 * (OK 0, TOKEN_REFUSED 1, NOT_FOUND 2, NOT_FINALIZED 3, STALE_GENERATION 4, OUT_OF_RANGE 5,
 * BUSY 6, ERROR 7). The tcp provider's own framing ({@code provider.tcp.Wire}) is below all of
 * this and is not written in the codec.
 */
package io.rdmaplane.rdma.codec;
