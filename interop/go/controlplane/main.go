// Command controlplane is a control plane's end of the llmgw agent stream on
// grpc-go, for interop tests of llmgw-wire's Python agent. Each --scenario is
// one behaviour of a real control plane that the Python side must survive:
//
//	graceful  on the first Register: Ack, StartShard, StopShard, then
//	          GracefulStop (GOAWAY); the call ends with OK
//	status    on the first Register: Ack, then the call ends with
//	          FAILED_PRECONDITION and the server stops at once
//	serve     on every Register: Ack and StartShard; serves until stdin
//	          closes or SIGTERM, then ends every call with OK
//
// Output, one event per line on stdout: LISTENING <port>; per call ENCODING
// <grpc-encoding the agent sent>; RECV <protojson> for every AgentMessage;
// SENT <protojson> for every ControlMessage; END <code> [<message>] when a
// call's handler ends; DONE when the server has stopped cleanly.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"io"
	"net"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	_ "google.golang.org/grpc/encoding/gzip" // accept gzip from agents, and answer in kind
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"

	llmgwv1 "llmgwinterop/gen/llmgwv1"
	"llmgwinterop/peer"
)

// The status the status scenario ends its call with.
const statusMessage = "node is cordoned: registration refused by the control plane"

// The api_key every StartShard carries; a test compares its hash (the
// peers never print a key).
const apiKey = "interop-api-key-0123456789"

// How long a graceful call lingers after GracefulStop began, for the agent to
// half-close or send what it still has (logged as RECV); then it ends with
// OK regardless, since GracefulStop waits for every call to end.
const drainWindow = 500 * time.Millisecond

type controlPlane struct {
	llmgwv1.UnimplementedAgentServiceServer

	scenario string
	srv      *grpc.Server

	// quit is closed when the server begins to stop: serving handlers end
	// their calls with OK.
	quit     chan struct{}
	quitOnce sync.Once
	// stopped is closed once GracefulStop or Stop has returned.
	stopped  chan struct{}
	stopOnce sync.Once
	// triggered is set by the first Register of a one-shot scenario.
	mu        sync.Mutex
	triggered bool
	// writes follows the sockets' writes (the status scenario's stop).
	writes *writeLog
}

func (c *controlPlane) beginQuit() { c.quitOnce.Do(func() { close(c.quit) }) }

// stop stops the server once, gracefully or not, in the background.
func (c *controlPlane) stop(graceful bool) {
	c.stopOnce.Do(func() {
		c.beginQuit()
		go func() {
			defer close(c.stopped)
			if graceful {
				c.srv.GracefulStop()
			} else {
				c.srv.Stop()
			}
		}()
	})
}

// firstRegister says whether this is the Register that starts a one-shot
// scenario; later streams are only logged.
func (c *controlPlane) firstRegister() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	first := !c.triggered
	c.triggered = true
	return first
}

func (c *controlPlane) Connect(stream llmgwv1.AgentService_ConnectServer) (err error) {
	defer func() {
		st := status.Convert(err)
		if st.Message() == "" {
			peer.Line("END", peer.CodeName(st.Code()))
		} else {
			peer.Line("END", peer.CodeName(st.Code()), peer.OneLine(st.Message()))
		}
	}()
	ctx := stream.Context()
	msgs := make(chan *llmgwv1.AgentMessage)
	recvErr := make(chan error, 1)
	go func() {
		for {
			m, err := stream.Recv()
			if err != nil {
				recvErr <- err
				return
			}
			peer.Line("RECV", peer.JSON(m))
			select {
			case msgs <- m:
			case <-ctx.Done():
				return
			}
		}
	}()
	send := func(m *llmgwv1.ControlMessage) error {
		if err := stream.Send(m); err != nil {
			return err
		}
		peer.Line("SENT", peer.JSON(m))
		return nil
	}
	for {
		select {
		case m := <-msgs:
			r := m.GetRegister()
			if r == nil {
				continue
			}
			switch c.scenario {
			case "graceful":
				if !c.firstRegister() {
					continue
				}
				for _, out := range []*llmgwv1.ControlMessage{ack(r), start(r), stop(r)} {
					if err := send(out); err != nil {
						return err
					}
				}
				c.stop(true)
				select {
				case <-recvErr:
				case <-time.After(drainWindow):
				}
				return nil
			case "status":
				if !c.firstRegister() {
					continue
				}
				if err := send(ack(r)); err != nil {
					return err
				}
				// The server stops in the stats handler, once this status
				// has been handed to the transport.
				return status.Error(codes.FailedPrecondition, statusMessage)
			case "serve":
				for _, out := range []*llmgwv1.ControlMessage{ack(r), start(r)} {
					if err := send(out); err != nil {
						return err
					}
				}
			}
		case err := <-recvErr:
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		case <-c.quit:
			return nil
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		}
	}
}

// stopAfterStatus stops the server as soon as the status scenario's call has
// ended: grpc-go reports stats.End after it handed the status to the
// transport, so the status goes out just before the connection closes.
type stopAfterStatus struct {
	peer.EncodingLogger
	c *controlPlane
}

func (h stopAfterStatus) HandleRPC(ctx context.Context, s stats.RPCStats) {
	h.EncodingLogger.HandleRPC(ctx, s)
	if end, ok := s.(*stats.End); ok && h.c.scenario == "status" &&
		status.Code(end.Error) == codes.FailedPrecondition {
		// grpc-go writes the status frames from its own writer goroutine and
		// Stop closes the sockets without flushing it: stop once a socket
		// write that began after the status was queued has finished, which
		// carries the status, so the connection closes right behind it.
		mark := h.c.writes.mark()
		go func() {
			h.c.writes.waitPast(mark, 10*time.Second)
			h.c.stop(false)
		}()
	}
}

// writeLog counts socket writes on the server's connections, so the status
// scenario can stop the server right after its status went out.
type writeLog struct {
	mu      sync.Mutex
	cond    *sync.Cond
	started uint64 // writes begun
	done    uint64 // the highest begun-number of a finished write
}

func newWriteLog() *writeLog {
	w := &writeLog{}
	w.cond = sync.NewCond(&w.mu)
	return w
}

func (w *writeLog) mark() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.started
}

// waitPast waits until a write begun after mark has finished, or timeout.
func (w *writeLog) waitPast(mark uint64, timeout time.Duration) {
	timer := time.AfterFunc(timeout, func() {
		w.mu.Lock()
		w.done = ^uint64(0)
		w.mu.Unlock()
		w.cond.Broadcast()
	})
	defer timer.Stop()
	w.mu.Lock()
	defer w.mu.Unlock()
	for w.done <= mark {
		w.cond.Wait()
	}
}

type loggedListener struct {
	net.Listener
	log *writeLog
}

func (l loggedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return loggedConn{Conn: c, log: l.log}, nil
}

type loggedConn struct {
	net.Conn
	log *writeLog
}

func (c loggedConn) Write(b []byte) (int, error) {
	c.log.mu.Lock()
	c.log.started++
	n := c.log.started
	c.log.mu.Unlock()
	written, err := c.Conn.Write(b)
	c.log.mu.Lock()
	if n > c.log.done {
		c.log.done = n
	}
	c.log.mu.Unlock()
	c.log.cond.Broadcast()
	return written, err
}

func ack(r *llmgwv1.Register) *llmgwv1.ControlMessage {
	return &llmgwv1.ControlMessage{Msg: &llmgwv1.ControlMessage_Ack{Ack: &llmgwv1.Ack{
		NodeId:        r.GetNodeId(),
		AdoptedShards: int32(len(r.GetRunningShards())),
		Detail:        "registered with the grpc-go control plane",
	}}}
}

// start is a StartShard with every field set, so that a test sees each one
// cross the wire.
func start(r *llmgwv1.Register) *llmgwv1.ControlMessage {
	return &llmgwv1.ControlMessage{Msg: &llmgwv1.ControlMessage_StartShard{StartShard: &llmgwv1.StartShard{
		ReplicaId:     "rep-go",
		ShardId:       r.GetNodeId() + "-s0",
		Rank:          0,
		Nnodes:        2,
		LeaderAddr:    "10.0.0.7",
		LeaderPort:    29500,
		GpuIndices:    []int32{0, 1, 2, 3},
		Hcas:          []string{"mlx5_0", "mlx5_1"},
		MgmtInterface: "eth0",
		HttpPort:      8000,
		Profile: &llmgwv1.EngineProfile{
			Name:            "llama-70b-tp4",
			Engine:          "vllm",
			GpuClass:        "h100-80g",
			Tp:              4,
			Pp:              2,
			GpusPerNode:     4,
			Nodes:           2,
			Args:            []string{"--max-model-len", "32768"},
			Env:             map[string]string{"VLLM_LOGGING_LEVEL": "INFO", "NCCL_IB_HCA": "mlx5"},
			ModelPath:       "/models/llama-3-70b",
			ServedModelName: "llama-3-70b",
			Adapters:        []*llmgwv1.LoraAdapter{{Name: "sql", Source: "/adapters/sql"}},
			KvEvents:        true,
		},
		StartupTimeoutMs: 600000,
		Pool:             "default",
		Fabric:           "ib-east",
		ProfileFp:        "fp-3f2a9c",
		ApiKey:           apiKey,
		CpuThreads:       0,
	}}}
}

func stop(r *llmgwv1.Register) *llmgwv1.ControlMessage {
	return &llmgwv1.ControlMessage{Msg: &llmgwv1.ControlMessage_StopShard{StopShard: &llmgwv1.StopShard{
		ReplicaId:     "rep-go",
		ShardId:       r.GetNodeId() + "-s0",
		GracePeriodMs: 30000,
	}}}
}

func main() {
	os.Exit(run())
}

func run() int {
	listen := flag.String("listen", "127.0.0.1:0", "address to listen on")
	scenario := flag.String("scenario", "serve", "graceful, status or serve")
	gzipOut := flag.Bool("gzip", false, "compress every message sent with gzip (gzip from agents is always accepted)")
	var tlsFlags peer.TLSFlags
	flag.StringVar(&tlsFlags.Cert, "tls-cert", "", "server certificate (PEM); TLS when given")
	flag.StringVar(&tlsFlags.Key, "tls-key", "", "server private key (PEM)")
	flag.StringVar(&tlsFlags.CA, "tls-ca", "", "CA (PEM) that client certificates must chain to; mutual TLS when given")
	flag.Parse()
	switch *scenario {
	case "graceful", "status", "serve":
	default:
		peer.Logf("controlplane: --scenario %q: expected graceful, status or serve", *scenario)
		return 2
	}

	c := &controlPlane{scenario: *scenario, quit: make(chan struct{}), stopped: make(chan struct{}),
		writes: newWriteLog()}
	opts := []grpc.ServerOption{grpc.StatsHandler(stopAfterStatus{c: c})}
	if *gzipOut {
		opts = append(opts, grpc.RPCCompressor(grpc.NewGZIPCompressor())) //nolint:staticcheck // the one server-wide way in this grpc-go
	}
	if tlsFlags.Enabled() {
		creds, err := tlsFlags.Server()
		if err != nil {
			peer.Logf("controlplane: %v", err)
			return 2
		}
		opts = append(opts, grpc.Creds(creds))
	}
	c.srv = grpc.NewServer(opts...)
	llmgwv1.RegisterAgentServiceServer(c.srv, c)

	lis, err := net.Listen("tcp", *listen)
	if err != nil {
		peer.Logf("controlplane: listen %s: %v", *listen, err)
		return 1
	}
	peer.Line("LISTENING", strconv.Itoa(lis.Addr().(*net.TCPAddr).Port))

	// stdin closing (the test is done, or died) and SIGTERM stop the server
	// gracefully, every open call ending with OK.
	go func() {
		_, _ = io.Copy(io.Discard, bufio.NewReader(os.Stdin))
		c.stop(true)
	}()
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-sigs
		c.stop(true)
	}()

	serveErr := c.srv.Serve(loggedListener{Listener: lis, log: c.writes})
	if serveErr != nil && !errors.Is(serveErr, grpc.ErrServerStopped) {
		peer.Logf("controlplane: serve: %v", serveErr)
		return 1
	}
	// Serve returns as soon as the listener closes; the calls end later.
	select {
	case <-c.stopped:
	case <-time.After(30 * time.Second):
		peer.Logf("controlplane: calls still open 30 s after the stop began; stopping hard")
		c.srv.Stop()
		return 1
	}
	peer.Line("DONE")
	return 0
}
