// Package tensor defines feedmesh's data model: an Element is an ordered set
// of named Tensors (name, dtype, shape, little-endian raw bytes). A batch is
// an element whose tensors have a leading batch dimension. The types are
// kept free of dependencies so every layer (pipeline, transport, client) can
// share them.
package tensor
