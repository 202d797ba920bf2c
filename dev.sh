#!/usr/bin/env bash
# The developer's loop, one entry point for people and CI (.ci/run):
#
#   ./dev.sh test     go vet, every test under the race detector, the tests
#                     built only without it, then the Python package's
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
  go test -run "^($names)\$" $pkgs
}

fuzz() { go test -run='^$' -fuzz="^$1\$" -fuzztime="${FUZZTIME:-$3x}" "$2"; }

# The Python package's tests run against it installed by the command
# docs/python.md gives, in a venv of Debian's interpreter, which has numpy,
# torch and pytest (the first python3 on PATH may be another).
python_tests() {
  local venv
  venv=$(mktemp -d)
  trap 'rm -rf "$venv"' RETURN
  /usr/bin/python3 -m venv --system-site-packages "$venv"
  "$venv/bin/python" -m pip install --quiet --no-build-isolation --no-index ./python
  "$venv/bin/python" -m pytest -q -p no:cacheprovider python/tests
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
  s3_gateway
  go vet ./...
  go test -race ./...
  run_race_off
  python_tests
  ;;
python) python_tests ;;
race) s3_gateway; go test -race ./... ;;
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
  go test -run='^$' -bench=. "$@" ./...
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
  sed -n '2,10s/^# \{0,1\}//p' "$0"
  [ "${1:-}" = help ] || [ -z "${1:-}" ]
  ;;
esac
