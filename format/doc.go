// Package format reads and writes .tinygpt model files, version 2, byte for
// byte as the original TinyGPT (browser engine and converters) writes them.
//
// # Container
//
// All integers are little-endian:
//
//	"TGPT"         4 bytes of magic
//	version        uint32, always 2
//	H              uint32, length of the JSON header
//	header         H bytes of UTF-8 JSON (see [Header])
//	state          the rest of the file, laid out as below
//
// The vocabulary is not stored; it is always 256 (bytes). The header's
// manifest lists every tensor with a PyTorch-style name, a shape and a float
// offset into a weights-only view of the parameters. Careful: the manifest
// gives matrices as [out, in] but the bytes are stored [in, out] row-major
// (y = x·W + b). This package keeps the stored layout: [File.Weights] holds
// q/k/v/o_proj as [C, C] with rows indexed by the input, fc_in as C rows of
// dMlp and fc_out as dMlp rows of C. Embeddings and vectors are stored as
// listed.
//
// # State
//
// Every state starts with the int32 training step. What follows depends on
// the header's weightDtype, P being [ParamCount] of the config:
//
//   - full (no weightDtype, includesOptimizerState true): for each tensor in
//     manifest order, its weights w[n], then its AdamW moments m[n] and v[n],
//     all float32. Size 4 + 12·P.
//   - fp32 weights only (no weightDtype or "fp32", includesOptimizerState
//     false): the P weights as float32. Size 4 + 4·P. The original never
//     writes this form; this package reads and writes it.
//   - "fp16": the P weights as IEEE binary16. Size 4 + 2·P. The original
//     converter rounds to nearest with ties away from zero and flushes
//     magnitudes below 2⁻²⁵ to zero; see [Float32ToFloat16].
//   - "int4": per tensor, blocks of 64 consecutive stored values (the last
//     block may be partial). Let S be the total number of blocks. The state
//     holds the step, then all S block scales as binary16 (2·S bytes, tensor
//     by tensor), then all packed blocks (32·S bytes): value i of a block is
//     the nibble q+8 in byte i/2, low nibble for even i, padding nibbles 0.
//     A value dequantises to (nibble−8)·scale. The header records
//     int4BlockSize 64, int4ScalesBytes 2·S and int4PackedBytes 32·S.
//
// # Reading
//
// [Decode] checks everything it can before it allocates: magic, version,
// header length, JSON, config sanity (see [Config.Validate]), manifest,
// stateByteLength and the exact state size the config and dtype need. It
// never panics and never allocates more than a small multiple of its input.
// Non-finite weights (NaN, ±Inf) are not an error when reading; callers that
// care must check.
package format
