// Package tensor defines feedmesh's data model: an Element is an ordered set
// of named Tensors (name, dtype, shape, little-endian raw bytes). A batch is
// an element whose tensors have a leading batch dimension. The types are
// kept free of dependencies so every layer (pipeline, transport, client) can
// share them.
//
// Files:
//
//	element.go  DType, Tensor, Element
//	build.go    tensors from Go values (scalars, vectors, byte strings)
//	convert.go  dtype conversions (float16, bfloat16, Cast)
//	lengths.go  the "<name>_length" convention of padded tensors (LengthSuffix, LengthsName)
package tensor
