// Package kubernetes holds the Kubernetes deployment of a pipeline (a
// JobSet manifest, a Dockerfile; README.md walks through it) and the test
// that decodes the manifest strictly into the JobSet and Kubernetes API
// types. It is a module of its own so that the Kubernetes API modules stay
// out of the library's go.mod.
package kubernetes
