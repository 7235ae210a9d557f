package fn

import "github.com/feedmesh/feedmesh/pipeline/objstore"

// loadCached loads a tokenizer as the process may read it.
func loadCached(path, variant string, load func(path string, data []byte) (*bpeModel, error)) (*bpeModel, error) {
	return loadTokenizer(objstore.Local(), path, variant, load)
}

// readTokenizerFile reads a tokenizer file (gunzipped when its name ends
// in .gz).
func readTokenizerFile(path string) ([]byte, error) {
	f, err := objstore.Local().OpenFile(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readTokenizer(path, f)
}
