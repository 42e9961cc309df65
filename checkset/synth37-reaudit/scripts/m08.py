import rp, collections, optsteps
d = rp.load('m08'); r = rp.R(d, 0); T = r.T
print('peak', r.pk, rp.g(r.A[r.pk]), rp.g(r.Rv[r.pk]), 'gap', rp.m(r.Rv[r.pk]-r.A[r.pk]))
cl = optsteps.opt_clusters(r); ends=[c[1] for c in cl]; b=[0]+[e+1 for e in ends]
print('steps', len(cl), 'lows', [rp.m(min(r.A[b[k]:b[k+1]])) for k in range(len(ends))], 'highs', [rp.g(max(r.A[b[k]:b[k+1]])) for k in range(len(ends))])
live = r.live_at(r.pk)
by=collections.defaultdict(lambda:[0,0])
for sz,ai,fr in live: k=rp.site(fr); by[k][0]+=sz; by[k][1]+=1
for k,v in sorted(by.items(), key=lambda x:-x[1][0])[:4]: print(k, rp.g(v[0]), v[1])
mha = [(sz,fr) for sz,ai,fr in live if fr and fr[0]['filename'].endswith('functional.py') and fr[0]['name']=='multi_head_attention_forward' and fr[0]['line'] in (5497,5499,5501)]
print('MHA prob blocks', len(mha), rp.g(sum(s for s,f in mha)), sum(s for s,f in mha)/r.A[r.pk])
print('1.05GiB blocks', sum(1 for sz,ai,fr in live if sz==1131875328))
print('sdpa allocs', sum(1 for e in T if e['action']=='alloc' and any('scaled_dot_product' in f['name'] for f in e['frames'])))
