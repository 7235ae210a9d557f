package fn

// The built-in functions that pipeline specs name. Programs embedding
// feedmesh add their own with RegisterMap / RegisterMapFactory; names must
// not collide with these.
func init() {
	RegisterMapFactory("tokenize_whitespace", tokenizeWhitespace)
	RegisterMapFactory("tokenize_bytes", tokenizeBytes)
	RegisterFileMapFactory("tokenize_bpe", tokenizeBPE)
	RegisterFileMapFactory("tokenize_tiktoken", tokenizeTiktoken)
	RegisterFilterFactory("length_between", lengthBetween)
	RegisterMapFactory("decode_image", decodeImage)
	RegisterMapFactory("resize", resize)
	RegisterMapFactory("random_crop", randomCrop)
	RegisterMapFactory("random_flip", randomFlip)
	RegisterMapFactory("random_resized_crop", randomResizedCrop)
	RegisterMapFactory("decode_and_crop", decodeAndCrop)
	RegisterMapFactory("normalize", normalize)
	RegisterMapFactory("cast", cast)
	RegisterMapFactory("json_field", jsonField)
	RegisterMapFactory("cost", cost)
}

// TakesTokenizerFile reports whether the built-in map function name reads
// the file named by its `tokenizer` arg (relative paths in a spec file are
// resolved against the spec's directory).
func TakesTokenizerFile(name string) bool {
	return name == "tokenize_bpe" || name == "tokenize_tiktoken"
}
