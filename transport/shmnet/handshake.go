//go:build linux

package shmnet

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"slices"
	"time"

	"github.com/pkg/errors"
	"golang.org/x/sys/unix"

	"github.com/pipemare/pipemare/transport"
)

// wireVersion is the version of the handshake and the frames; a peer
// speaking another is refused.
const wireVersion = 3

// hello is what a peer says about itself when a link opens, as a packet on
// the Unix socket: the dialer's carries the link's shared memory and
// eventfds (SCM_RIGHTS), the acceptor's answers it, or refuses.
type hello struct {
	Wire     int
	Peer     int
	Stages   int
	Links    [][2]int
	Identity transport.Identity
	Ring     int    // the size of each ring (the dialer's)
	Refused  string `json:",omitempty"` // the acceptor refuses the link: why
}

// The fds a dialer hands over, in order: the shared memory, then the
// eventfds of its ring (data, room) and of the acceptor's (data, room).
const handedFDs = 5

// helloPacket is the largest hello: identities are small.
const helloPacket = 1 << 16

func (e *Endpoint) hello() hello {
	h := hello{Wire: wireVersion, Peer: int(e.self), Stages: e.net.Stages, Identity: e.net.Identity, Ring: e.s.ringSize}
	for _, l := range e.links {
		h.Links = append(h.Links, [2]int{int(l.A), int(l.B)})
	}
	return h
}

// check compares the hello of peer who with this endpoint's; want is the
// peer expected (AnyPeer: any this endpoint accepts).
func (e *Endpoint) check(h hello, who string, want transport.Peer) error {
	got := transport.Peer(h.Peer)
	switch {
	case h.Wire != wireVersion:
		return errors.Errorf("%s speaks wire version %d, this peer %d: run the same pipemare version everywhere", who, h.Wire, wireVersion)
	case want != transport.AnyPeer && got != want:
		return errors.Errorf("expected %v at %s, got %v: are the processes given the same run name?", want, who, got)
	case h.Stages != e.net.Stages:
		return errors.Errorf("%s runs a pipeline of %d stages, %v one of %d", who, h.Stages, e.self, e.net.Stages)
	}
	if err := e.net.Identity.Check(h.Identity, who); err != nil {
		return err
	}
	links := make([]transport.Link, len(h.Links))
	for i, l := range h.Links {
		links[i] = transport.Link{A: transport.Peer(l[0]), B: transport.Peer(l[1])}
	}
	if !slices.Equal(links, e.links) {
		return errors.Errorf("%s links stages %v, %v links %v: the processes disagree on which stages exchange tensors", who, links, e.self, e.links)
	}
	return nil
}

// credentials returns the pid of the process at the other end of c, after
// checking that it runs as this process's user (SO_PEERCRED): the rings
// are shared with it.
func credentials(c *net.UnixConn) (int, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return 0, err
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) { cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED) }); err != nil {
		return 0, err
	}
	if cerr != nil {
		return 0, errors.Wrap(cerr, "SO_PEERCRED")
	}
	if int(cred.Uid) != os.Getuid() {
		return int(cred.Pid), errors.Errorf("the process at the other end (pid %d) runs as uid %d, this one as %d: shared memory is only shared with the same user", cred.Pid, cred.Uid, os.Getuid())
	}
	return int(cred.Pid), nil
}

// sendHello writes h as one packet, with fds attached if any.
func sendHello(c *net.UnixConn, h hello, fds []int, deadline time.Time) error {
	b, err := json.Marshal(h)
	if err != nil {
		return err
	}
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	_ = c.SetWriteDeadline(deadline)
	defer c.SetWriteDeadline(time.Time{})
	_, _, err = c.WriteMsgUnix(b, oob, nil)
	return err
}

// recvHello reads one hello packet and the fds attached to it (the caller
// owns them, also on an error).
func recvHello(c *net.UnixConn, deadline time.Time) (hello, []int, error) {
	var h hello
	b := make([]byte, helloPacket)
	oob := make([]byte, unix.CmsgSpace(4*handedFDs))
	_ = c.SetReadDeadline(deadline)
	defer c.SetReadDeadline(time.Time{})
	n, oobn, flags, _, err := c.ReadMsgUnix(b, oob)
	fds, perr := rights(oob[:oobn])
	if err == nil && perr != nil {
		err = perr
	}
	switch {
	case err != nil:
		return h, fds, err
	case n == 0:
		return h, fds, errors.New("the connection closed before the handshake")
	case flags&(unix.MSG_TRUNC|unix.MSG_CTRUNC) != 0:
		return h, fds, errors.New("a handshake packet too large")
	}
	if err := json.Unmarshal(b[:n], &h); err != nil {
		return h, fds, errors.Wrap(err, "a handshake that is not a pipemare hello")
	}
	return h, fds, nil
}

// rights returns the fds a packet's control message carried.
func rights(oob []byte) ([]int, error) {
	if len(oob) == 0 {
		return nil, nil
	}
	msgs, err := unix.ParseSocketControlMessage(oob)
	var fds []int
	for _, m := range msgs {
		if got, err := unix.ParseUnixRights(&m); err == nil {
			fds = append(fds, got...)
		}
	}
	return fds, err
}

// answerNo refuses the peer at the other end of c, saying why, and closes
// c. It stops reading first, then reads what had arrived: a Unix socket
// closed with packets unread resets its peer, which would lose the
// refusal. A hello the peer sends later fails (EPIPE), and the peer reads
// the refusal (handshake).
func answerNo(c *net.UnixConn, why string) {
	_ = sendHello(c, hello{Wire: wireVersion, Refused: why}, nil, time.Now().Add(time.Second))
	_ = c.CloseRead()
	_ = c.SetReadDeadline(time.Now().Add(time.Second))
	b := make([]byte, helloPacket)
	oob := make([]byte, unix.CmsgSpace(4*handedFDs))
	for {
		n, oobn, _, _, err := c.ReadMsgUnix(b, oob)
		fds, _ := rights(oob[:oobn])
		closeFDs(fds)
		if err != nil || n == 0 {
			break
		}
	}
	c.Close()
}

// shutListener makes ln refuse new connections (ECONNREFUSED, as if
// closed) while those already in line can still be taken (queuedConns).
func shutListener(ln *net.UnixListener) {
	if raw, err := ln.SyscallConn(); err == nil {
		_ = raw.Control(func(fd uintptr) { _ = unix.Shutdown(int(fd), unix.SHUT_RD) })
	}
}

// queuedConns takes the connections in ln's line without waiting.
func queuedConns(ln *net.UnixListener) []*net.UnixConn {
	raw, err := ln.SyscallConn()
	if err != nil {
		return nil
	}
	var out []*net.UnixConn
	_ = raw.Control(func(fd uintptr) {
		for {
			nfd, _, err := unix.Accept4(int(fd), unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK)
			if err != nil {
				return // EAGAIN: no one else in line
			}
			f := os.NewFile(uintptr(nfd), "unix")
			c, err := net.FileConn(f)
			f.Close()
			if uc, ok := c.(*net.UnixConn); err == nil && ok {
				out = append(out, uc)
			} else if err == nil {
				c.Close()
			}
		}
	})
	return out
}

func closeFDs(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}

// handed is what a dialer hands an acceptor: the link's shared memory and
// its eventfds, made on the dialer's side.
type handed struct {
	mem      []byte
	ringSize int         // each ring's; each slab's is slabSize(ringSize)
	evs      [4]*os.File // the dialer's ring's data and room, the acceptor's
}

// makeShared creates a link's shared memory and eventfds; fds are to be
// handed over (then closed: the memfd's mapping and the files keep them).
func makeShared(ringSize int) (h handed, fds []int, err error) {
	memfd, mem, err := newSharedMemory(ringLayout(ringSize))
	if err != nil {
		return h, nil, err
	}
	h.mem, h.ringSize, fds = mem, ringSize, []int{memfd}
	for i := range h.evs {
		fd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
		if err != nil {
			h.release()
			unix.Close(memfd)
			return handed{}, nil, errors.Wrap(err, "eventfd")
		}
		// Not File.Fd: it would put the file in blocking mode, out of the
		// runtime's poller.
		h.evs[i] = os.NewFile(uintptr(fd), "eventfd")
		fds = append(fds, fd)
	}
	return h, fds, nil
}

// takeShared maps the fds a dialer handed over; it closes the memfd, and
// every fd on an error.
func takeShared(fds []int, ringSize int) (handed, error) {
	var h handed
	if len(fds) != handedFDs {
		closeFDs(fds)
		return h, errors.Errorf("%d file descriptors handed over, %d expected", len(fds), handedFDs)
	}
	if ringSize < minRingSize || ringSize > 1<<30 {
		closeFDs(fds)
		return h, errors.Errorf("a ring of %d bytes", ringSize)
	}
	mem, err := mapShared(fds[0], ringLayout(ringSize))
	unix.Close(fds[0])
	if err != nil {
		closeFDs(fds[1:])
		return h, err
	}
	h.mem, h.ringSize = mem, ringSize
	for i, fd := range fds[1:] {
		h.evs[i] = os.NewFile(uintptr(fd), "eventfd")
	}
	return h, nil
}

// release closes the eventfds and unmaps the memory.
func (h handed) release() {
	h.closeEvents()
	h.unmap()
}

// closeEvents closes the eventfds.
func (h handed) closeEvents() {
	for _, f := range h.evs {
		if f != nil {
			f.Close()
		}
	}
}

// unmap unmaps the memory.
func (h handed) unmap() {
	if h.mem != nil {
		_ = unix.Munmap(h.mem)
	}
}

func peerAt(p transport.Peer, pid int) string {
	if pid > 0 {
		return fmt.Sprintf("%v (pid %d)", p, pid)
	}
	return p.String()
}
