// Reader and writer of the safetensors format (https://github.com/huggingface/safetensors):
// an 8-byte little-endian header length N, N bytes of JSON header
// {"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, "__metadata__": {..}},
// then the data buffer (offsets are relative to its start).
// Invariants: read_safetensors validates everything the way the reference implementation does
// (offsets contiguous from 0, no overlap, no gap, each range exactly shape x dtype bytes, the
// buffer fully covered) and throws Error(Input, "<path>: ...") naming the file and the problem
// (Error(Io) when the file cannot be opened). write_safetensors is atomic: it writes a temporary
// file in the target's directory and renames it, so a failed write never leaves a partial or
// temporary file behind (an existing target stays as it was). Host byte order must be little
// endian (checked at compile time).
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "compiler/config.h"

namespace dskc {

struct StTensor {
  std::string dtype;            // safetensors name: "F32", "F16", "BF16", "F64", "I64", ...
  std::vector<int64_t> shape;   // [] is a scalar (one element)
  std::string bytes;            // little-endian raw data, numel x dtype size bytes
};

struct SafeTensorsFile {
  std::map<std::string, StTensor> tensors;
  std::map<std::string, std::string> metadata;  // "__metadata__" (string to string)
};

SafeTensorsFile read_safetensors(const std::string& path);
void write_safetensors(const std::string& path, const SafeTensorsFile& file);

// Bytes per element of a safetensors dtype name; 0 when the name is unknown. Known: BOOL, U8,
// I8, F8_E5M2, F8_E4M3, I16, U16, F16, BF16, I32, U32, F32, F64, I64, U64.
int st_dtype_size(const std::string& dtype);
// "F32" | "F16" | "BF16" for a dskc dtype.
const char* st_dtype_name(DType t);
int64_t st_numel(const std::vector<int64_t>& shape);

// Converts any numeric dtype except the F8 ones to doubles (exactly; I64/U64 beyond 2^53 round).
// Throws Error(Input) for an F8 dtype or a byte count that does not match the shape.
std::vector<double> tensor_to_doubles(const StTensor& t);
// Stores values as F32, F16, BF16 or F64 (round to nearest even), or I32/I64 (must be integral).
// Throws Error(Input) if values.size() is not the shape's element count or the dtype is
// unsupported.
StTensor tensor_from_doubles(const std::vector<double>& values, const std::vector<int64_t>& shape,
                             const std::string& dtype);
StTensor tensor_from_doubles(const std::vector<double>& values, const std::vector<int64_t>& shape,
                             DType dtype);

}  // namespace dskc
