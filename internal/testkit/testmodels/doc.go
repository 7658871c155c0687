// Package testmodels provides small, deterministic Gorgonia models that are
// used as test fixtures by the graph splitter and pipeline engine test
// suites. It is not meant for production use.
//
// Every builder (MLP, CNN, ResNet, Attention in All; Tied, GRU, Penalty,
// which read a learnable in several places, in SharedWeights) constructs a
// fresh *gorgonia.ExprGraph at a fixed (micro)batch size and dtype, with
// uniquely named learnables initialised deterministically from a seed and
// uniquely named data inputs. The models are written the way an ordinary
// Gorgonia user would write them: plain graph builders ending in a
// log-softmax cross-entropy cost against one-hot labels (plus a weight
// penalty in Penalty). Gradients are not
// added to the graph; callers do that themselves (for example with
// gorgonia.Grad) so they stay free to split or transform the graph first.
//
// Model.Batch draws deterministic random data for the inputs, and
// Model.LearnableValues and SnapshotValues help tests compare parameters
// before and after training steps.
package testmodels
