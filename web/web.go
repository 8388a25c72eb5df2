// Package web holds the playground page of "tinygpt serve": plain HTML, CSS and JavaScript
// modules, embedded in the binary so that the playground works offline with no build step.
package web

import "embed"

// Files holds the page under static/.
//
//go:embed static
var Files embed.FS
