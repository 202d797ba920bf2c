#!/usr/bin/env bash
# The developer's loop, one entry point for people and CI (.ci/run):
#
#   ./dev.sh test     the Debian packages the tests use (installed as root,
#                     else the apt-get line to run), go vet, every test under
#                     the race detector, the tests built only without it,
#                     then the Python package's
#   ./dev.sh deps     only the Debian packages
#   ./dev.sh python   the Python package installed as docs/python.md says,
#                     into a throwaway venv of Debian's python3, and its tests
#   ./dev.sh race     every test under the race detector
#   ./dev.sh lint     gofmt, go vet, staticcheck (pinned in go.mod's tools),
#                     mypy --strict on the Python package and the oracle
#   ./dev.sh bench [go test flags]   every benchmark (CI: -race -benchtime=1x)
#   ./dev.sh sim      the fault-injection, preemption, network and
#                     object-store scenarios
#   ./dev.sh fuzz     short runs of every fuzz target (FUZZTIME overrides)
set -euo pipefail
cd "$(dirname "$0")"

# Tests built only without the race detector have !race in their build
# line: they start remote nodes, and the pinned protoactor-go remote races
# with itself. They are found by that line, so none can be left out.
race_off_files() { git ls-files '*_test.go' | xargs grep -l -E '^//go:build .*!race\b'; }
race_off() {
  local files pkgs names
  files=$(race_off_files)
  pkgs=$(for f in $files; do echo "./$(dirname "$f")"; done | sort -u)
  names=$(grep -h -o '^func Test[A-Za-z0-9_]*(' $files | sed 's/^func \(.*\)(/\1/' | grep -v '^TestMain$' | sort -u | paste -sd'|')
  echo "$names" $pkgs
}

run_race_off() {
  local names pkgs
  read -r names pkgs <<<"$(race_off)"
  go test -timeout "$GO_TEST_TIMEOUT" -run "^($names)\$" $pkgs
}

fuzz() { go test -run='^$' -fuzz="^$1\$" -fuzztime="${FUZZTIME:-$3x}" "$2"; }

# Every go test gets this timeout, a package's binary at a time: the
# slowest package, cmd/actorfeed, took 380 s under the race detector in CI
# and 601 s on a loaded machine, and a package's tests must stay under a
# third of their timeout, so that a loaded machine does not fail them.
# A hang is still stopped, at the timeout.
GO_TEST_TIMEOUT=${GO_TEST_TIMEOUT:-40m}
PYTHON_TEST_TIMEOUT=${PYTHON_TEST_TIMEOUT:-30m}

# The Debian packages the tests use, installed where they are missing:
# the data set the demo and the Python tests read; protoc, which go
# generate runs; GNU time, whose peak RSS the hostile-input tests read;
# Debian's Python, numpy, torch and pytest, and what a venv install takes;
# crc32c and protobuf for TFRecord's independent writer; libjpeg-turbo
# (readers/vision), and Pillow and torchvision, which the decoders and
# the loader are checked against; braceexpand, WebDataset's, against which
# shard lists' braces are checked; mypy for lint; SentencePiece and
# fortune(6)'s texts, which the GPT example tokenizes (docs/tokens.md).
DEBIAN_PACKAGES=(dataset-fashion-mnist protobuf-compiler time python3-numpy python3-torch python3-pytest
  python3-venv python3-pip python3-setuptools python3-wheel python3-crc32c python3-protobuf python3-torchvision
  python3-pil libturbojpeg0 python3-braceexpand mypy sentencepiece python3-sentencepiece fortunes)

# deps installs the missing packages as root, as CI runs; anyone else
# gets the exact command to run, before any test starts.
deps() {
  command -v go >/dev/null || { echo "dev.sh: no go on PATH: the tests need Go 1.26 (https://go.dev/dl)"; exit 2; }
  if ! command -v dpkg >/dev/null; then
    echo "dev.sh: no dpkg: the tests use Debian 12's packages: ${DEBIAN_PACKAGES[*]}"; exit 2
  fi
  local need=() p
  for p in "${DEBIAN_PACKAGES[@]}"; do
    dpkg -s "$p" >/dev/null 2>&1 || need+=("$p")
  done
  [ ${#need[@]} -eq 0 ] && return
  if [ "$(id -u)" -ne 0 ]; then
    echo "dev.sh: the tests need Debian packages this machine lacks; install them with:"
    echo "  sudo apt-get install -y ${need[*]}"
    exit 2
  fi
  echo "dev.sh: installing ${need[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
}

# The Python package's tests run against it installed by the command
# docs/python.md gives, in a venv of Debian's interpreter, which has numpy,
# torch and pytest (the first python3 on PATH may be another).
python_tests() {
  local venv
  venv=$(mktemp -d)
  trap 'rm -rf "$venv"' RETURN
  /usr/bin/python3 -m venv --system-site-packages "$venv"
  # Installing builds the wheel, and the wheel its binary (python/setup.py).
  "$venv/bin/python" -m pip install --quiet --no-build-isolation --no-index ./python
  # The suite takes 4 to 5 minutes here; a hang is stopped at the timeout.
  timeout --kill-after=1m "$PYTHON_TEST_TIMEOUT" "$venv/bin/python" -m pytest -q -p no:cacheprovider python/tests
}

# Versity's S3 gateway, which the object-storage tests start on 127.0.0.1
# (internal/s3server, which names this version): built from its module
# once, into Go's bin (about 2.5 minutes).
s3_gateway() {
  command -v versitygw >/dev/null || [ -x "$(go env GOPATH)/bin/versitygw" ] ||
    go install github.com/versity/versitygw/cmd/versitygw@v1.8.0
}

case "${1:-}" in
test)
  deps
  s3_gateway
  go vet ./...
  go test -race -timeout "$GO_TEST_TIMEOUT" ./...
  run_race_off
  python_tests
  ;;
deps) deps ;;
python) deps; python_tests ;;
race) deps; s3_gateway; go test -race -timeout "$GO_TEST_TIMEOUT" ./... ;;
race-off) race_off ;; # the names and packages of the tests test runs without the race detector
lint)
  unformatted=$(gofmt -l $(git ls-files '*.go'))
  if [ -n "$unformatted" ]; then
    echo "gofmt would change:"; echo "$unformatted"; exit 1
  fi
  go vet ./...
  go tool staticcheck ./...
  # The Python package and the Python the Go tests run (the differential
  # tests' oracle), typed.
  /usr/bin/mypy --strict internal/oracle/oracle.py python/actorfeed
  ;;
bench)
  shift
  go test -timeout "$GO_TEST_TIMEOUT" -run='^$' -bench=. "$@" ./...
  ;;
sim)
  seed=${SIM_SEED:-1}
  echo "== fault-injection scenarios: the regression set and 1000 random ones, 4 at a time (docs/reliability.md)"
  go run ./cmd/actorfeed sim --scenarios 1000 --seed "$seed" --parallel 4
  echo "== preempted jobs: the resize regressions and 1000 scenarios stopped, killed and resumed, as other numbers of ranks too (docs/determinism.md)"
  go run ./cmd/actorfeed sim --preempt --scenarios 1000 --seed "$seed" --parallel 4
  echo "== the data service under network faults: a hostile trainer beside a well-behaved one, then 300 scenarios (docs/distributed.md)"
  go run ./cmd/actorfeed sim --network --scenarios 300 --seed "$seed" --parallel 4
  echo "== object stores: reads of s3:// objects through throttling, server errors, cut and stalled bodies, drops and delays, against disk (docs/storage.md)"
  s3_gateway
  go run ./cmd/actorfeed sim --object-store --scenarios 150 --seed "$seed"
  ;;
fuzz)
  # Budgets are counts of executions (10 s to 2 min each here, most of it
  # minimising new inputs), not durations: with a duration, Go 1.26's fuzz
  # coordinator can report a spurious "context deadline exceeded" when the
  # time runs out mid-execution (https://go.dev/issue/75804, fixed in Go
  # 1.27).
  fuzz FuzzDecode ./tensor 400000
  fuzz FuzzStack ./tensor 400000
  fuzz FuzzStackSequences ./tensor 200000
  fuzz FuzzScanner ./readers/recordio 800000
  fuzz FuzzChunk ./readers/recordio 800000
  fuzz FuzzUnmarshalIndex ./readers/recordio 100000
  fuzz FuzzParse ./program 100000
  fuzz FuzzWriteInput ./cmd/actorfeed 50000
  fuzz FuzzParseSchedule ./sim 100000
  fuzz FuzzExpandBraces ./readers 30000
  fuzz FuzzHeader ./readers/idx 400000
  fuzz FuzzDecode ./readers/idx 50000
  fuzz FuzzIndexed ./readers/tokens 50000
  fuzz FuzzLLMC ./readers/tokens 50000
  fuzz FuzzShard ./readers/wds 100000
  fuzz FuzzSpans ./readers/wds 100000
  fuzz FuzzScanSpans ./readers/wds 100000
  fuzz FuzzUnmarshalSpans ./readers/wds 100000
  fuzz FuzzSplit ./readers/wds 200000
  fuzz FuzzShardsAgainstTarfile ./readers/wds 100000
  fuzz FuzzExample ./readers/tfrecord 100000
  fuzz FuzzRecords ./readers/tfrecord 100000
  fuzz FuzzTFRecordsAgainstProtobuf ./readers/tfrecord 100000
  fuzz FuzzApply ./readers/vision 20000
  fuzz FuzzImagesAgainstPillow ./readers/vision 50000
  fuzz FuzzBatch ./messages 250000
  fuzz FuzzResume ./actors 20000
  fuzz FuzzDecodeState ./actors 100000
  fuzz FuzzRelayMachine ./internal/protocol 300000
  fuzz FuzzMergeMachine ./internal/protocol 300000
  fuzz FuzzFanoutMachine ./internal/protocol 300000
  fuzz FuzzFilesMachine ./internal/protocol 300000
  fuzz FuzzXMapMachine ./internal/protocol 300000
  fuzz FuzzServiceMachine ./internal/protocol 200000
  ;;
*)
  sed -n '2,16s/^# \{0,1\}//p' "$0"
  [ "${1:-}" = help ] || [ -z "${1:-}" ]
  ;;
esac
