// +build nogzip

package main

// gzipName is empty: this build has no gzip encoding registered.
var gzipName = ""
