// Package zootest holds what the tests of the packages that train zoo
// models share (package train's and the zoo's accuracy checks): the
// models to run and a few steps of their data. Only _test.go files import
// it.
package zootest
