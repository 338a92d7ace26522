package assignd

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"log"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// smokeToken is the admin token of the server the smoke test starts (the
// host wants at least 16 characters).
const smokeToken = "t0k-smoke-test-admin-token"

// startServer runs $ASSIGND_BIN serve on a free port and returns its base
// URL; it is killed when the test ends.
func startServer(t *testing.T, bin string) string {
	cmd := exec.Command(bin, "serve", "--listen", "127.0.0.1:0", "--data-dir", t.TempDir())
	cmd.Env = append(os.Environ(), "ASSIGND_ADMIN_TOKEN="+smokeToken)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	first := make(chan string, 1)
	go func() {
		lines := bufio.NewScanner(stdout)
		if lines.Scan() {
			first <- lines.Text()
		}
		close(first)
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case line := <-first:
		if !strings.HasPrefix(line, "listening on ") {
			t.Fatalf("assignd serve said %q", line)
		}
		return strings.TrimPrefix(line, "listening on ")
	case <-time.After(30 * time.Second):
		t.Fatal("assignd serve did not listen")
	}
	return ""
}

func createGroup(t *testing.T, base, group, config string) {
	req, _ := http.NewRequest(http.MethodPut, base+"/v1/groups/"+group, bytes.NewReader([]byte(config)))
	req.Header.Set("Authorization", "Bearer "+smokeToken)
	req.Header.Set("Content-Type", "application/json")
	answer, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer answer.Body.Close()
	body, _ := io.ReadAll(answer.Body)
	if answer.StatusCode != http.StatusOK && answer.StatusCode != http.StatusCreated {
		t.Fatalf("creating the group: %d %s", answer.StatusCode, body)
	}
}

// ledger is who processes what, as the listeners were told; it fails the
// test when a task is active on two members at once.
type ledger struct {
	t     *testing.T
	mu    sync.Mutex
	owner map[Task]string
}

func (l *ledger) listener(name string) Listener {
	release := func(tasks []Task) {
		l.mu.Lock()
		defer l.mu.Unlock()
		for _, task := range tasks {
			if l.owner[task] == name {
				delete(l.owner, task)
			}
		}
	}
	return ListenerFuncs{
		OnAssigned: func(tasks []Task, _ bool) {
			l.mu.Lock()
			defer l.mu.Unlock()
			for _, task := range tasks {
				if other, taken := l.owner[task]; taken && other != name {
					l.t.Errorf("%v given to %s while %s processes it", task, name, other)
				}
				l.owner[task] = name
			}
		},
		OnRevoked: release,
		OnLost:    release,
	}
}

func (l *ledger) count(name string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, owner := range l.owner {
		if owner == name {
			n++
		}
	}
	return n
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func allowed(m *Member, n uint32) bool {
	for p := uint32(0); p < n; p++ {
		if !m.MayProcess(Task{"orders", p}) {
			return false
		}
	}
	return true
}

// TestSmokeAgainstTheRealHost runs two members against assignd serve when
// ASSIGND_BIN names the binary.
func TestSmokeAgainstTheRealHost(t *testing.T) {
	bin := os.Getenv("ASSIGND_BIN")
	if bin == "" {
		t.Skip("ASSIGND_BIN is not set: no smoke test against the real host")
	}
	base := startServer(t, bin)
	createGroup(t, base, "g", `{"topics":[{"name":"orders","partitions":4}],"learners":"off",
		"heartbeat_interval_ms":200,"expansion_timeout_ms":2000}`)
	book := &ledger{t: t, owner: map[Task]string{}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start := func(name string) *Member {
		m, err := Start(ctx, Config{URLs: []string{base}, Group: "g", Topics: []string{"orders"},
			Logger: &StdLogger{Logger: testLogger(t), Min: LevelInfo}}, book.listener(name))
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	a := start("a")
	waitFor(t, "a holds all 4 tasks", func() bool { return book.count("a") == 4 && allowed(a, 4) })
	if a.Epoch() < 1 || a.MemberID() == "" {
		t.Fatalf("epoch %d, member id %q", a.Epoch(), a.MemberID())
	}
	b := start("b")
	waitFor(t, "the tasks are split 2/2", func() bool {
		return book.count("a") == 2 && book.count("b") == 2 && len(b.Assignment().Active) == 2
	})
	for _, m := range []*Member{a, b} {
		leaveCtx, done := context.WithTimeout(ctx, 10*time.Second)
		if err := m.Leave(leaveCtx); err != nil {
			t.Fatal(err)
		}
		done()
		<-m.Done()
		if m.Reason() != StopLeft || m.Err() != nil {
			t.Fatalf("stopped %q: %v", m.Reason(), m.Err())
		}
	}
}

// testLogger writes the member's logs into the test's output.
func testLogger(t *testing.T) *log.Logger {
	return log.New(testWriter{t}, "", 0)
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
