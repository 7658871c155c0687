package transport

import (
	"fmt"

	"gorgonia.org/gorgonia"
)

// Peer names a party of a pipeline: a stage index 0..P−1, or Driver.
type Peer int

const (
	// Driver is the peer that owns the schedule and feeds the data.
	Driver Peer = -1
	// AnyPeer, given to Recv, takes the earliest message of the kind from
	// whichever peer sent it.
	AnyPeer Peer = -2
)

func (p Peer) String() string {
	switch p {
	case Driver:
		return "driver"
	case AnyPeer:
		return "any peer"
	}
	return fmt.Sprintf("stage %d", int(p))
}

// Kind says what a Message carries. Each kind between two peers is its own
// ordered queue.
type Kind uint8

const (
	// Activation carries a stage's outputs of one microbatch to a later
	// stage that reads them.
	Activation Kind = iota + 1
	// Gradient carries the gradients of those outputs back.
	Gradient
	// Control carries the driver's orders to a stage.
	Control
	// Reply carries a stage's answers to the driver.
	Reply
	// Inference carries a stage's outputs of an evaluation forward (no
	// gradient follows), a queue apart from Activation so that an
	// evaluation between training steps never meets training traffic
	// still queued.
	Inference
	// Shared carries a learnable several stages read: a replica's
	// gradient sums of a step to the owner, the owner's new versions to
	// the replicas.
	Shared
)

func (k Kind) String() string {
	switch k {
	case Activation:
		return "activation"
	case Gradient:
		return "gradient"
	case Control:
		return "control"
	case Reply:
		return "reply"
	case Inference:
		return "inference"
	case Shared:
		return "shared"
	}
	return fmt.Sprintf("kind %d", uint8(k))
}

// Message is what a transport carries.
//
// Values are tensors (an entry may be nil: a gradient with no path). Body
// is the payload of Control and Reply messages: a value of a type its
// protocol registers with encoding/gob, so that a network transport can
// encode it; Local passes it as it is. Once sent, a message belongs to the
// transport and then to its receiver: the sender must not modify Values or
// Body afterwards.
type Message struct {
	Kind     Kind
	From, To Peer
	// Micro is the microbatch an Activation or Gradient belongs to.
	Micro int
	// Version is the sender's weight version when it sent the message.
	Version int
	Values  []gorgonia.Value
	Body    any
	// Own says the Values are the message's own — no other message, and
	// nothing the sender keeps, holds them — so that a network transport
	// may return them to the process's pools once it has written them
	// (internal/recycle), as a stage's activations and gradients are. On
	// a received message it says the receiver owns the Values alone and
	// may return them to the pools once done: the in-process transports
	// deliver it as sent; shmnet and grpcnet set it on every message, whose
	// values are their own copies, the dense ones taken from the pools or,
	// for shmnet's large activations and gradients, lent from its shared
	// memory (recycle.Lend), whose pages the receiver's Put frees.
	Own bool
}

func (m Message) String() string {
	return fmt.Sprintf("%v from %v to %v (microbatch %d)", m.Kind, m.From, m.To, m.Micro)
}
