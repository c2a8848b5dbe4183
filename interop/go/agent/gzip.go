// +build !nogzip

package main

import "google.golang.org/grpc/encoding/gzip"

// gzipName is the gzip encoding's name; importing it registers the encoding.
var gzipName = gzip.Name
