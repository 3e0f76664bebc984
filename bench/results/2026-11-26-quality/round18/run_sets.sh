# usage: run_sets.sh TAG MODES...
tag=$1; shift
for spec in "zh written bench-q14-zh" "zh none bench-q14-zn" "zh tfidf bench-q14-zt" "hard written bench-q14-hd" "fresh written bench-q14-fr" "fresh tfidf bench-q14-ft" "en written bench-q14-en" "en tfidf bench-q14-et" "check tfidf bench-q14-ct"; do
  set -- $spec "$@"
  c=$1; k=$2; p=$3; shift 3
  python -m bench.dialogue_eval --corpus $c --keywords $k --prefix $p --reuse --keep --workers 2 --modes "$@" --out /work/scratch/r18/${tag}_${c}_${k}.json > /work/scratch/r18/${tag}_${c}_${k}.log 2>&1
  echo "$c $k $(grep -E '^\| (fusion|two_stage) \|' /work/scratch/r18/${tag}_${c}_${k}.log | head -2 | awk -F'|' '{print $2,$4}' | tr '\n' ' ')"
done
