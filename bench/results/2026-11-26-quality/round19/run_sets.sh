# fresh stores with the scoped-names code; all modes
source /work/scratch/env.sh
cd /work/main
M="fusion bm25 vector rrf two_stage"
for spec in "zh written bench-s33-zh" "hard written bench-s33-hd" "fresh written bench-s33-fr" "check tfidf bench-s33-ct"; do
  set -- $spec
  c=$1; k=$2; p=$3
  python -m bench.dialogue_eval --corpus $c --keywords $k --prefix $p --keep --workers 2 --modes $M --out /work/scratch/s33/q/new_${c}_${k}.json > /work/scratch/s33/q/new_${c}_${k}.log 2>&1
  echo "$c $k done $(date +%T)"
done
python -m bench.memdaily --data /work/shared/data/dev/memdaily --prefix bench-s33-md --keep --workers 2 --modes fusion+expand bm25 vector rrf two_stage --out /work/scratch/s33/q/new_md.json > /work/scratch/s33/q/new_md.log 2>&1
echo "md done $(date +%T)"
