# Sourced by build.sh, test.sh and worker: the Go toolchain's environment.
# The caches live in .cache/ here (gitignored) unless the caller chose
# others, so a read-only HOME does not matter; the module has no
# dependencies, so nothing is ever downloaded.
export GOFLAGS="${GOFLAGS:--mod=mod}"
export GOCACHE="${GOCACHE:-$PWD/.cache/go-build}"
export GOPATH="${GOPATH:-$PWD/.cache/gopath}"
export GOPROXY="${GOPROXY:-off}"
