// Package runspec is one run's specification: the recipe's name plus what
// the user changed, as data. Every process of a run, every record of it
// (settings.json, a sweep's run records) and every restarted stage process
// carries the same Spec; its JSON form is the one serialisation of a run's
// settings, its Hash names it, Diff says how two differ, and Identity is
// what a transport's handshake compares between peers (transport.Identity),
// so that a stage started with another setting is refused.
//
// A Spec names settings, not flags: its JSON keys are the setting names
// that errors (*Error) and differences (Difference) carry. A command maps
// them to its own words; pipemare's flags are the names with "-" for "_".
// The path from a Spec to the engine's configuration is train.ConfigFor,
// which holds the rules of what may combine with what.
package runspec
