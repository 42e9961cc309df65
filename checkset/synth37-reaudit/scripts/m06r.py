import rp, optsteps, bisect
d = rp.load('m06'); r = rp.R(d, 0); T = r.T
cl = optsteps.opt_clusters(r); ends=[c[1] for c in cl]
sm=[ai for ai,fi in r.life.items() if fi is None and T[ai]['size']==4]
print([bisect.bisect_left(ends, ai) for ai in sm], sum(T[ai]['size'] for ai in sm))
print([[ (f['filename'].split('/')[-1], f['line'], f['name']) for f in T[sm[0]]['frames']]])
allk=[ai for ai in r.life if 'grpo_trainer.py' in str([f['filename'] for f in T[ai]['frames'][:1]]) and any(f['line']==270 for f in T[ai]['frames'])]
print('all allocs at 270', len(allk))
