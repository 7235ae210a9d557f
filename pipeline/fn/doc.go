// Package fn holds the map and filter functions that pipeline specs name
// (tokenize_whitespace, decode_image, length_between, …) and the registry
// through which programs embedding feedmesh add their own.
//
// Files:
//
//	registry.go   the registry (RegisterMap, RegisterFilter, LookupMap, …) and FnContext
//	builtins.go   the table of built-in functions by name
//	text.go       tokenize_whitespace, tokenize_bytes, length_between
//	bpe_load.go   tokenize_bpe: a Hugging Face tokenizer.json read once per process, what is refused
//	bpe.go        byte-level BPE: added tokens, merges by rank (scan or heap), the word cache
//	bpe_split.go  GPT-2's and cl100k's pre-tokenizer patterns, by hand (Go's regexp has no lookahead)
//	bpe_o200k.go  o200k_base's pattern, on a small backtracking matcher over character classes
//	tiktoken.go   tokenize_tiktoken: OpenAI's rank files and encodings
//	image.go      decode_image, resize, random_crop, random_flip, normalize (bounded by DefaultMaxPixels)
//	vision.go     random_resized_crop and decode_and_crop (torchvision's RandomResizedCrop; the fused JPEG decode)
//	resample.go   Pillow's resampling (bilinear, area, bicubic); its two passes in C (resample_cgo.go) or Go (resample_go.go)
//	jpeg.go       the JPEG decoder in use, the frame header read in Go; jpeg_cgo.go: libjpeg-turbo through cgo and dlopen
//	cast.go       cast and json_field
//	cost.go       cost: busy CPU or a wait per element, a parallelisable stand-in for expensive work
//	common.go     helpers every function uses (its input tensor, replacing a tensor)
//	args.go       Args: a function's arguments from the spec, typed (args_list.go: lists)
package fn
