#!/bin/sh
# test_readme_method_names.sh — the README calls each DP method by the name the tools print: the rows
# of its "What each DP method costs" table and the columns of its plan table are experiment names of
# tools/run_experiments (its default list, which summary.txt, results.csv and the charts' labels
# carry), each row's name is a row of docs/demo/summary.txt (the run the table quotes), and each
# row's flags say the method that name runs (dpsgd = --norm direct --clip bk, ghost = ghost twopass,
# flash = flash bk, mixed = mixed bk). A README that says "ghost + twopass" where the chart says
# "ghost" fails (issue 38). Reads files only: a second. Exits 0 on pass, 1 on failure.
fail=0
bad() { echo "FAIL: $*"; fail=1; }
R=README.md
S=docs/demo/summary.txt
# the suite's default experiments, as its --help says them
defaults=$(sh tools/run_experiments --help | sed -n 's/^ *experiments (default: \([^,]*\), or .*/\1/p')
[ -n "$defaults" ] || { echo "FAIL: tools/run_experiments --help does not list its default experiments"; exit 1; }
# the method table: the rows after the header line '| method | ...' up to the first line not a row
rows=$(awk '/^\| method \|/ { on = 1; getline; next } on && !/^\|/ { exit } on' "$R")
[ -n "$rows" ] || { echo "FAIL: $R has no '| method |' table"; exit 1; }
n=0
echo "$rows" | {
    f=0
    while IFS= read -r line; do
        name=$(echo "$line" | cut -d'|' -f2 | sed 's/^ *//; s/ *$//; s/`//g')
        flags=$(echo "$line" | cut -d'|' -f3 | sed 's/`//g')
        case " $defaults " in *" $name "*) ;; *) echo "FAIL: $R's method '$name' is not an experiment the tools print ($defaults)"; f=1; continue ;; esac
        awk -v e="$name" '$1 == e { found = 1 } END { exit !found }' "$S" || { echo "FAIL: '$name' is not a row of $S"; f=1; }
        case $name in
            dpsgd) want="--norm direct --clip bk" ;; ghost) want="--norm ghost --clip twopass" ;; flash) want="--norm flash --clip bk" ;;
            mixed) want="--norm mixed --clip bk" ;; lora) want="train_lora" ;;
            *+*) want="--norm ${name%+*} --clip ${name#*+}" ;; *) want="" ;;
        esac
        case $flags in *"$want"*) ;; *) echo "FAIL: $R: $name's row says '$flags', not '$want'"; f=1 ;; esac
        n=$((n + 1))
    done
    [ "$n" -ge 7 ] || { echo "FAIL: $R's method table has $n rows, want the 7 DP experiments"; f=1; }
    [ $f -eq 0 ] && echo "ok   $R's method table: $n names, each the tools' and a row of $S"
    exit $f
} || fail=1
# the plan table's columns (| T | vanilla | dpsgd | ...)
cols=$(sed -n 's/^| T | \(.*\) |$/\1/p' "$R" | head -n 1 | sed 's/ | / /g')
[ -n "$cols" ] || bad "$R has no '| T | ...' plan table"
for c in $cols; do
    case " $defaults " in *" $c "*) ;; *) bad "$R's plan table column '$c' is not an experiment the tools print ($defaults)" ;; esac
done
[ -z "$cols" ] || [ $fail -ne 0 ] || echo "ok   $R's plan table: $(echo $cols | wc -w) columns, each the tools' name"
exit $fail
