import rp, collections, optsteps, iters
for stem in ('m09','m10'):
    d = rp.load(stem); r = rp.R(d, 0); T = r.T
    print(stem, 'peak', r.pk, rp.g(r.A[r.pk]), rp.g(r.Rv[r.pk]), 'gap', rp.m(r.Rv[r.pk]-r.A[r.pk]), '%.1f%%'%(100*(r.Rv[r.pk]-r.A[r.pk])/r.Rv[r.pk]))
    if stem=='m10':
        b = iters.steps_from_ann(d, r); lh = iters.lows_highs(r, b)
        print('steps', len(lh), [ (rp.g(x[2]), rp.g(x[3])) for x in lh][:3], 'peak step', [k for k,x in enumerate(lh) if x[0]<=r.pk<x[1]])
    else:
        cl = optsteps.opt_clusters(r); ends=[c[1] for c in cl]; b=[0]+[e+1 for e in ends]
        print('steps', len(cl), [rp.m(min(r.A[b[k]:b[k+1]])) for k in range(len(ends))], [rp.g(max(r.A[b[k]:b[k+1]])) for k in range(len(ends))])
    live = r.live_at(r.pk)
    by=collections.defaultdict(lambda:[0,0])
    for sz,ai,fr in live: k=rp.site(fr); by[k][0]+=sz; by[k][1]+=1
    for k,v in sorted(by.items(), key=lambda x:-x[1][0])[:4]: print(' ', k, rp.g(v[0]), v[1])
    big = sorted(((sz, rp.site(fr)) for sz,ai,fr in live), reverse=True)[:5]; print(' ', [(rp.m(a), b) for a,b in big])
    sf=[i for i,e in enumerate(T) if e['action']=='segment_free']
    if sf:
        print(' segfree', len(sf), sf[0], sf[-1], rp.g(sum(T[i]['size'] for i in sf)), rp.g(r.Rv[sf[0]-1]), '->', rp.g(r.Rv[sf[-1]]), 'alloc', rp.g(r.A[sf[0]-1]), rp.g(r.A[sf[-1]]), rp.site(T[sf[0]]['frames']))
        after=sum(e['size'] for i,e in enumerate(T) if e['action']=='segment_alloc' and i>sf[-1]); print(' after', after, rp.g(after))
    sa=[i for i,e in enumerate(T) if e['action']=='segment_alloc']; print(' last segalloc', sa[-1], 'max res', rp.g(max(r.Rv)))
