import rp, collections
d = rp.load('m01'); r = rp.R(d, 0); T = r.T
print(collections.Counter(e['action'] for e in T))
ann = [(i, e) for i, e in enumerate(T) if e['action'] not in ('alloc','free_requested','free_completed','segment_alloc','segment_free','oom')]
print(len(ann), collections.Counter(e['action'] for i,e in ann))
print(ann[:3])
pk = r.pk; print('peak', pk, rp.g(r.A[pk]), rp.g(r.Rv[pk]), 'gap', rp.m(r.Rv[pk]-r.A[pk]), (r.Rv[pk]-r.A[pk])/r.Rv[pk])
live = r.live_at(pk)
by = collections.defaultdict(lambda: [0,0])
for sz, ai, fr in live:
    k = rp.site(fr); by[k][0]+=sz; by[k][1]+=1
for k,v in sorted(by.items(), key=lambda x:-x[1][0])[:6]: print(k, rp.g(v[0]), v[1])
print(T[pk].get('frames',[])[:6])
print(sorted([sz for sz,ai,fr in live])[-4:])
import iters
b = iters.steps_from_ann(d, r)
lh = iters.lows_highs(r, b)
print('nsteps', len(lh))
for k, x in enumerate(lh): print(k, x[0], x[1], rp.g(x[2]), rp.g(x[3]), x[4])
# optimizer ranges
ann = d['external_annotations']
rngs=[]; st={}
for a in ann:
    if a['name'].startswith('Optimizer.step'):
        if a['stage']=='START': st[a['name']]=a['time_us']
        else: rngs.append((a['name'], st[a['name']], a['time_us']))
print('optim ranges', len(rngs))
cnt=0
for nm,t0,t1 in rngs:
    if any(e['action']=='alloc' and t0<=e['time_us']<=t1 for e in T): cnt+=1
print('allocating ranges', cnt)
# the 2 GiB blocks frames
for sz, ai, fr in r.live_at(r.pk):
    if sz == 2**30 and ai>=0: print(ai, [(f['filename'].split('/')[-1], f['line'], f['name']) for f in fr if f['line']][:8])
bw=[i for i,e in enumerate(T) if e['action']=='alloc' and any('Engine::thread_main' in f['name'] for f in e.get('frames',[]))]
print('bw events', bw[0], bw[-1])
import collections
c=collections.Counter()
for nm,t0,t1 in rngs:
    ev=[e for e in T if e['action']=='alloc' and t0<=e['time_us']<=t1]
    c[(nm, len(ev), any(any('/torch/optim' in f['filename'] for f in e['frames']) for e in ev))]+=1
print(c)
print('end', rp.g(r.A[-1]), rp.g(r.Rv[-1]))
# step0 kept: adam state blocks
print(rp.m(sum(sz for a,(sz,ai,fr,st) in r.end_live.items() if ai>=0 and sz<2**30)), sum(1 for a,(sz,ai,fr,st) in r.end_live.items() if ai>=0))
