package main

// main is never run: built with -buildmode=c-shared, the package is a
// library whose entry points are the exported functions of capi.go.
func main() {}
