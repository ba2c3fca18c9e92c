// Package web holds the dashboard's static files (plain HTML, CSS and ES
// modules, no build step), embedded into the binary so that the page works
// from a fresh clone and offline. Package server serves them under
// /dashboard.
package web

import "embed"

// Files is the dashboard: index.html, style.css and the modules under js/.
//
//go:embed index.html style.css js/*.js
var Files embed.FS
