package main

import (
	"net"
	"sync"
	"time"

	"google.golang.org/grpc/credentials"
)

// trailerWatch counts the calls whose status (the trailing HEADERS frame,
// END_STREAM set) has been written to a socket.
//
// grpc-go writes frames from its own writer goroutine, and Stop closes the
// sockets without flushing it; grpc-go 1.33 also leaves a drained connection
// open after GracefulStop when its last call ended after the second GOAWAY,
// waiting for the client to close it. Knowing which statuses are on the
// wire lets the control plane close connections right behind them, losing
// nothing.
type trailerWatch struct {
	mu       sync.Mutex
	cond     *sync.Cond
	trailers int
}

func newTrailerWatch() *trailerWatch {
	w := &trailerWatch{}
	w.cond = sync.NewCond(&w.mu)
	return w
}

// waitFor waits until n statuses have been written, or timeout; it says
// whether they were.
func (w *trailerWatch) waitFor(n int, timeout time.Duration) bool {
	timedOut := false
	timer := time.AfterFunc(timeout, func() {
		w.mu.Lock()
		timedOut = true
		w.mu.Unlock()
		w.cond.Broadcast()
	})
	defer timer.Stop()
	w.mu.Lock()
	defer w.mu.Unlock()
	for w.trailers < n && !timedOut {
		w.cond.Wait()
	}
	return w.trailers >= n
}

func (w *trailerWatch) add(n int) {
	if n == 0 {
		return
	}
	w.mu.Lock()
	w.trailers += n
	w.mu.Unlock()
	w.cond.Broadcast()
}

// watchedConn reads the HTTP/2 frames the server writes (plaintext: above
// TLS when there is TLS). A server's bytes are frames from the first one on
// (the connection preface is the client's).
type watchedConn struct {
	net.Conn
	w *trailerWatch

	mu     sync.Mutex
	header []byte // a frame header cut by the end of a write
	skip   int    // payload bytes of the current frame still to come
}

func (c *watchedConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	c.w.add(c.scan(b[:n]))
	return n, err
}

// scan follows the frames in p and gives how many trailing HEADERS frames
// (type 1, flag END_STREAM) it saw begin.
func (c *watchedConn) scan(p []byte) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	found := 0
	for len(p) > 0 {
		if c.skip > 0 {
			k := c.skip
			if k > len(p) {
				k = len(p)
			}
			c.skip -= k
			p = p[k:]
			continue
		}
		k := 9 - len(c.header)
		if k > len(p) {
			k = len(p)
		}
		c.header = append(c.header, p[:k]...)
		p = p[k:]
		if len(c.header) < 9 {
			break
		}
		h := c.header
		length := int(h[0])<<16 | int(h[1])<<8 | int(h[2])
		if h[3] == 0x1 && h[4]&0x1 != 0 {
			found++
		}
		c.skip = length
		c.header = c.header[:0]
	}
	return found
}

type watchedListener struct {
	net.Listener
	w *trailerWatch
}

func (l watchedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &watchedConn{Conn: c, w: l.w}, nil
}

// watchedCreds puts the watch above TLS, where the frames are readable.
type watchedCreds struct {
	credentials.TransportCredentials
	w *trailerWatch
}

func (c watchedCreds) ServerHandshake(raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	conn, auth, err := c.TransportCredentials.ServerHandshake(raw)
	if err != nil {
		return nil, nil, err
	}
	return &watchedConn{Conn: conn, w: c.w}, auth, nil
}

func (c watchedCreds) Clone() credentials.TransportCredentials {
	return watchedCreds{TransportCredentials: c.TransportCredentials.Clone(), w: c.w}
}
