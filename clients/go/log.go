package assignd

import (
	"fmt"
	"log"
	"os"
	"strconv"
	"strings"
)

// Level is a log line's severity.
type Level int

const (
	LevelDebug Level = iota
	LevelInfo
	LevelWarn
	LevelError
)

func (l Level) String() string {
	switch l {
	case LevelDebug:
		return "debug"
	case LevelInfo:
		return "info"
	case LevelWarn:
		return "warn"
	default:
		return "error"
	}
}

// Logger takes structured log lines: a message and alternating keys and
// values. Implement it to route the member's logs to your logger.
type Logger interface {
	Log(level Level, msg string, keyvals ...interface{})
}

// StdLogger writes key=value lines through a standard library logger,
// dropping lines below Min.
type StdLogger struct {
	Logger *log.Logger
	Min    Level
}

// NewStdLogger logs at info and above to stderr.
func NewStdLogger() *StdLogger {
	return &StdLogger{Logger: log.New(os.Stderr, "", log.LstdFlags|log.Lmicroseconds), Min: LevelInfo}
}

// Log writes `level=... msg="..." key=value ...`.
func (l *StdLogger) Log(level Level, msg string, keyvals ...interface{}) {
	if level < l.Min {
		return
	}
	var b strings.Builder
	b.WriteString("level=")
	b.WriteString(level.String())
	b.WriteString(" msg=")
	b.WriteString(strconv.Quote(msg))
	for i := 0; i < len(keyvals); i += 2 {
		b.WriteByte(' ')
		b.WriteString(fmt.Sprint(keyvals[i]))
		b.WriteByte('=')
		if i+1 < len(keyvals) {
			b.WriteString(logValue(keyvals[i+1]))
		}
	}
	l.Logger.Print(b.String())
}

// logValue quotes a value only when it needs it, so lines stay greppable.
func logValue(v interface{}) string {
	s := fmt.Sprint(v)
	if s == "" || strings.ContainsAny(s, " \t\n\"=") {
		return strconv.Quote(s)
	}
	return s
}

// nopLogger drops every line.
type nopLogger struct{}

func (nopLogger) Log(Level, string, ...interface{}) {}
