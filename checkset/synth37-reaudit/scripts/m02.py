import rp, pools, collections, statistics
d = rp.load('m02'); print([len(t) for t in d['device_traces']])
r = rp.R(d, 5); T = r.T
print(collections.Counter(e['action'] for e in T))
print('peak', r.pk, rp.g(r.A[r.pk]), rp.g(r.Rv[r.pk]))
mr = max(range(len(T)), key=lambda i:(r.Rv[i], -i)); print('maxres', mr, rp.g(r.Rv[mr]), 'alloc then', rp.g(r.A[mr]), 'diff to peak', rp.g(r.Rv[mr]-r.A[r.pk]), (r.Rv[mr]-r.A[r.pk])/r.Rv[mr])
sf = [i for i,e in enumerate(T) if e['action']=='segment_free']; print('segfree', len(sf), sf[0], sf[-1], rp.g(sum(T[i]['size'] for i in sf)))
print('res before/after', rp.g(r.Rv[sf[0]-1]), rp.g(r.Rv[sf[-1]]), 'alloc', rp.g(r.A[sf[0]-1]), rp.g(r.A[sf[-1]]))
print('frames at first segfree', [(f['filename'].split('/')[-1], f['line'], f['name']) for f in T[sf[0]].get('frames',[])][:5])
print('T[sf0-1]', T[sf[0]-1]['action'], 'T[sf-1+1]', T[sf[-1]+1]['action'])
sa = [(i,e['size']) for i,e in enumerate(T) if e['action']=='segment_alloc']
after = [s for i,s in sa if i > sf[-1]]; print('segallocs', len(sa), 'after', len(after), rp.g(sum(after)))
print('end', rp.g(r.A[-1]), rp.g(r.Rv[-1]))
res = pools.track(r, npu=True)
st1 = [x for x in res if x[0] < sf[0]]
cov = [x for x in st1 if x[2] >= x[1]]
print('stretch1 segallocs', len(st1), 'covered', len(cov))
for x in res:
    if x[0] in (115266,115267,115268): print(x[0], rp.m(x[1]), rp.g(x[2]))
large = [e['size'] for i,e in enumerate(T[:sf[0]]) if e['action']=='alloc' and e['size'] > 1<<20]
print('median large', rp.m(statistics.median(large)), 'max', rp.m(max(large)))
last_sa = sa[-1][0]; print('last segalloc', last_sa)
print([(f['filename'].split('/')[-1], f['line'], f['name']) for f in T[115266]['frames'] if 'train_summ' in f['filename']])
# reserved growth after peak step
prev = None
for i,e in enumerate(T):
    if e['action']=='segment_alloc' and i > 23761:
        fr=[(f['line'], f['name']) for f in e['frames'] if 'train_summ' in f['filename']][:2]
        if prev != fr: print(i, rp.g(r.Rv[i]), fr); prev = fr
