# sanitizer_summary.sh — sourced by the compute-sanitizer tests: sanitizer_verdict reads one run's
# output and says whether that tool found nothing, from the tool's OWN summary line:
#   memcheck, synccheck, initcheck   "========= ERROR SUMMARY: 0 errors"
#   racecheck                        "========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)"
#                                    (it prints no ERROR SUMMARY; a hazard, error or warning fails)
# and a run fails as well when the tool refused an NVTX call ("Call to nvtx... failed": the names in
# its reports would be missing), when memcheck's LEAK SUMMARY counts leaked bytes, when the summary
# line is missing (the run did not finish), or when it exited non-zero.
#   sanitizer_verdict TOOL RC < OUTPUT
# prints one line, "ok   <the summary line>" (returns 0) or the reason it failed (returns 1).
# tests/test_sanitizer_summary.sh checks it on canned outputs, without a GPU.

# The number in "... <KEY> <N> <word>": the last such line's N, commas dropped ("" when none).
sanitizer__count() {   # sanitizer__count TEXT SED-REGEX-WITH-ONE-GROUP
  printf '%s\n' "$1" | sed -n "s/$2/\\1/p" | tail -n 1 | tr -d ,
}

sanitizer_verdict() {
  tool=$1; rc=$2; out=$(cat)
  nvtx=$(printf '%s\n' "$out" | grep -m1 -E 'Call to nvtx[A-Za-z0-9_]* failed')
  if [ -n "$nvtx" ]; then echo "the tool refused an NVTX call: ${nvtx#========= }"; return 1; fi
  case "$tool" in
    racecheck)
      line=$(printf '%s\n' "$out" | grep -E 'RACECHECK SUMMARY: [0-9,]+ hazards? displayed' | tail -n 1)
      [ -n "$line" ] || { echo "no RACECHECK SUMMARY line: the run did not finish (exit $rc)"; return 1; }
      h=$(sanitizer__count "$line" '.*RACECHECK SUMMARY: \([0-9,]*\) hazard.*')
      e=$(sanitizer__count "$line" '.*(\([0-9,]*\) errors\{0,1\},.*')
      w=$(sanitizer__count "$line" '.*, \([0-9,]*\) warnings\{0,1\}).*')
      if [ "$h" != 0 ] || [ "$e" != 0 ] || [ "$w" != 0 ]; then echo "racecheck: ${line#========= }"; return 1; fi
      other=$(sanitizer__count "$out" '.*ERROR SUMMARY: \([0-9,]*\) error.*')
      if [ -n "$other" ] && [ "$other" != 0 ]; then echo "racecheck: ERROR SUMMARY: $other errors"; return 1; fi ;;
    memcheck|synccheck|initcheck)
      line=$(printf '%s\n' "$out" | grep -E 'ERROR SUMMARY: [0-9,]+ errors?' | tail -n 1)
      [ -n "$line" ] || { echo "no ERROR SUMMARY line: the run did not finish (exit $rc)"; return 1; }
      e=$(sanitizer__count "$line" '.*ERROR SUMMARY: \([0-9,]*\) error.*')
      if [ "$e" != 0 ]; then echo "$tool: ${line#========= }"; return 1; fi
      leak=$(sanitizer__count "$out" '.*LEAK SUMMARY: \([0-9,]*\) bytes leaked.*')
      if [ -n "$leak" ] && [ "$leak" != 0 ]; then echo "$tool: LEAK SUMMARY: $leak bytes leaked"; return 1; fi ;;
    *) echo "sanitizer_verdict: unknown tool '$tool'"; return 1 ;;
  esac
  if [ "$rc" != 0 ]; then echo "$tool: ${line#========= }, but the run exited $rc"; return 1; fi
  echo "ok   ${line#========= }"
  return 0
}
