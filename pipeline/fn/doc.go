// Package fn holds the map and filter functions that pipeline specs name
// (tokenize_whitespace, decode_image, length_between, …) and the registry
// through which programs embedding feedmesh add their own.
package fn
