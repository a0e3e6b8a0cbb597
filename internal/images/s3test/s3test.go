// Package s3test starts a real S3-compatible server for tests: SeaweedFS's
// `weed server -s3`, built from its Go module at the version
// scripts/seaweedfs.sh pins, on free loopback ports in a temporary
// directory, with an identity so credentials are checked. A missing binary
// fails the test: it is never skipped.
package s3test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// Server is one running SeaweedFS with a bucket.
type Server struct {
	// Endpoint is the S3 API's base URL (AWS_ENDPOINT_URL).
	Endpoint  string
	AccessKey string
	SecretKey string
	Bucket    string
	Region    string

	t     testing.TB
	bin   string
	dir   string
	ports [4]int
	cmd   *exec.Cmd
	done  chan struct{}
}

// Binary finds the weed binary: $FORKBOX_WEED, $FORKBOX_BIN/weed, or bin/weed
// at the module's root (where scripts/deps.sh test puts it).
func Binary() (string, error) {
	var tried []string
	cands := []string{os.Getenv("FORKBOX_WEED")}
	if b := os.Getenv("FORKBOX_BIN"); b != "" {
		cands = append(cands, filepath.Join(b, "weed"))
	}
	if root, err := moduleRoot(); err == nil {
		cands = append(cands, filepath.Join(root, "bin", "weed"))
	}
	for _, c := range cands {
		if c == "" {
			continue
		}
		tried = append(tried, c)
		if fi, err := os.Stat(c); err == nil && fi.Mode()&0o111 != 0 {
			return c, nil
		}
	}
	return "", fmt.Errorf("no SeaweedFS weed binary (tried %v): run scripts/seaweedfs.sh bin/weed (scripts/deps.sh test does)", tried)
}

func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", os.ErrNotExist
		}
		dir = parent
	}
}

// Start runs a SeaweedFS for the test, waits until its S3 API answers,
// creates a bucket, and stops it at cleanup.
func Start(t testing.TB) *Server {
	t.Helper()
	bin, err := Binary()
	if err != nil {
		t.Fatal(err)
	}
	s, err := Launch(bin, t.TempDir())
	if s != nil {
		t.Cleanup(s.Stop)
	}
	if err != nil {
		t.Fatal(err)
	}
	s.t = t
	return s
}

// Launch runs weed from bin with its data in dir (for programs; tests call
// Start) and creates the bucket. The caller stops it.
func Launch(bin, dir string) (*Server, error) {
	s := &Server{bin: bin, dir: dir, AccessKey: "forkboxtest", SecretKey: "forkbox-test-secret-key",
		Bucket: "forkbox-test", Region: "us-east-1"}
	ports, err := freePorts(len(s.ports))
	if err != nil {
		return nil, err
	}
	copy(s.ports[:], ports)
	s.Endpoint = "http://127.0.0.1:" + strconv.Itoa(s.ports[3])
	if err := s.writeConfig(); err != nil {
		return nil, err
	}
	if err := s.start(); err != nil {
		return s, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := s.Client().MakeBucket(ctx, s.Bucket, minio.MakeBucketOptions{Region: s.Region}); err != nil {
		return s, fmt.Errorf("create bucket %s: %w", s.Bucket, err)
	}
	return s, s.writable()
}

// writable waits until an object can be written: the S3 API answers
// before its volume server has registered (the first write after a start
// waits for that), and a test's own timeouts should not count it.
func (s *Server) writable() error {
	deadline := time.Now().Add(90 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := s.Client().PutObject(ctx, s.Bucket, ".s3test-probe", strings.NewReader("ok"), 2, minio.PutObjectOptions{})
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("weed server takes no writes after 90s: %w", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (s *Server) writeConfig() error {
	cfg := fmt.Sprintf(`{"identities":[{"name":"forkbox","credentials":[{"accessKey":%q,"secretKey":%q}],`+
		`"actions":["Admin","Read","Write","List","Tagging"]}]}`, s.AccessKey, s.SecretKey)
	if err := os.MkdirAll(filepath.Join(s.dir, "data"), 0o700); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(s.dir, "s3.json"), []byte(cfg), 0o600)
}

// Restart starts the server again (after Stop or Kill) on the same ports
// and data, and waits until it answers; a failure fails the test.
func (s *Server) Restart() {
	err := s.start()
	if err == nil {
		err = s.writable()
	}
	if err != nil {
		if s.t == nil {
			panic(err)
		}
		s.t.Helper()
		s.t.Fatal(err)
	}
}

func (s *Server) start() error {
	p := s.ports
	args := []string{"server", "-dir=" + filepath.Join(s.dir, "data"), "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
		"-master.port=" + strconv.Itoa(p[0]), "-master.port.grpc=" + strconv.Itoa(p[0]+10000),
		"-volume.port=" + strconv.Itoa(p[1]), "-volume.port.grpc=" + strconv.Itoa(p[1]+10000),
		"-filer", "-filer.port=" + strconv.Itoa(p[2]), "-filer.port.grpc=" + strconv.Itoa(p[2]+10000),
		"-s3", "-s3.port=" + strconv.Itoa(p[3]), "-s3.config=" + filepath.Join(s.dir, "s3.json"),
		"-master.volumeSizeLimitMB=1024", "-volume.max=16"}
	cmd := exec.Command(s.bin, args...)
	log, err := os.OpenFile(filepath.Join(s.dir, "weed.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		log.Close()
		return fmt.Errorf("start %s: %w", s.bin, err)
	}
	s.cmd, s.done = cmd, make(chan struct{})
	go func() { cmd.Wait(); log.Close(); close(s.done) }()
	return s.wait()
}

// wait polls the S3 API until it answers a signed request.
func (s *Server) wait() error {
	deadline := time.Now().Add(90 * time.Second)
	cl := s.Client()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := cl.ListBuckets(ctx)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-s.done:
			b, _ := os.ReadFile(filepath.Join(s.dir, "weed.log"))
			return fmt.Errorf("weed server exited: %s", tail(b))
		default:
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(filepath.Join(s.dir, "weed.log"))
			return fmt.Errorf("weed server's S3 API did not answer in 90s: %v\n%s", err, tail(b))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func tail(b []byte) string {
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// Client is a minio-go client of the server, for tests that look at the
// bucket directly.
func (s *Server) Client() *minio.Client {
	cl, err := minio.New(s.Endpoint[len("http://"):], &minio.Options{
		Creds: credentials.NewStaticV4(s.AccessKey, s.SecretKey, ""), Region: s.Region,
		BucketLookup: minio.BucketLookupPath, MaxRetries: 1,
	})
	if err != nil {
		panic(err) // only a malformed endpoint, which Launch never makes
	}
	return cl
}

// Env is the environment a forkbox daemon reads the store's endpoint and
// credentials from.
func (s *Server) Env() []string {
	return []string{"AWS_ENDPOINT_URL=" + s.Endpoint, "AWS_REGION=" + s.Region,
		"AWS_ACCESS_KEY_ID=" + s.AccessKey, "AWS_SECRET_ACCESS_KEY=" + s.SecretKey}
}

// URL is the --object-store URL of prefix in the server's bucket.
func (s *Server) URL(prefix string) string { return "s3://" + s.Bucket + "/" + prefix }

// Stop ends the server (SIGTERM, then SIGKILL after 10s); a stopped server
// is not an error.
func (s *Server) Stop() { s.signal(syscall.SIGTERM) }

// Kill ends the server at once, as a crash would.
func (s *Server) Kill() { s.signal(syscall.SIGKILL) }

func (s *Server) signal(sig syscall.Signal) {
	if s.cmd == nil {
		return
	}
	syscall.Kill(-s.cmd.Process.Pid, sig)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		<-s.done
	}
	s.cmd = nil
}

// freePorts returns n loopback ports, each free with its gRPC companion
// (port+10000, as SeaweedFS names them), the 2n all distinct. Each is held
// open until all are chosen: ports picked one at a time and released at
// once came back twice (master and volume server both on one port, and the
// volume server's gRPC listen failed in CI).
func freePorts(n int) ([]int, error) {
	var held []net.Listener
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	used := map[int]bool{}
	var out []int
	for range 50 * n {
		if len(out) == n {
			return out, nil
		}
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		held = append(held, l)
		p := l.Addr().(*net.TCPAddr).Port
		if p+10000 > 65535 || used[p] || used[p+10000] {
			continue
		}
		l2, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p+10000))
		if err != nil {
			continue
		}
		held = append(held, l2)
		used[p], used[p+10000] = true, true
		out = append(out, p)
	}
	if len(out) == n {
		return out, nil
	}
	return nil, fmt.Errorf("no %d free loopback port pairs", n)
}
