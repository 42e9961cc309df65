import rp, optsteps, collections
d = rp.load('m06'); print([len(t) for t in d['device_traces']])
r = rp.R(d, 0); T = r.T
cl = optsteps.opt_clusters(r); ends=[c[1] for c in cl]; b=[0]+[e+1 for e in ends]
print('steps', len(cl))
print('lows', [round(min(r.A[b[k]:b[k+1]])/2**30,2) for k in range(len(ends))])
print('peak', r.pk, rp.g(r.A[r.pk]), rp.g(r.Rv[r.pk]), 'gap', rp.m(r.Rv[r.pk]-r.A[r.pk]))
never = [(ai, r.T[ai]['size']) for ai, fi in r.life.items() if fi is None]
big = [ai for ai,sz in never if sz == 622329856]
print('never-freed big', len(big), big[0], big[-1])
c = collections.Counter(rp.site(T[ai]['frames']) for ai in big); print(c)
c2 = collections.Counter((T[ai]['frames'][0]['filename'].split('/')[-1], T[ai]['frames'][0]['line']) for ai in big); print(c2)
small=[(ai,sz) for ai,sz in never if sz==4]; print('4B never freed', len(small), rp.site(T[small[0][0]]['frames']) if small else None)
live = r.live_at(r.pk); print('leak blocks live at peak', sum(1 for sz,ai,fr in live if ai in set(big)))
by=collections.defaultdict(lambda:[0,0])
for sz,ai,fr in live: k=rp.site(fr); by[k][0]+=sz; by[k][1]+=1
for k,v in sorted(by.items(), key=lambda x:-x[1][0])[:4]: print(k, rp.g(v[0]), v[1])
print('training_step line in leak frames', collections.Counter([f['line'] for f in T[big[0]]['frames'] if 'grpo_trainer' in f['filename']]))
r1 = rp.R(d, 1)
print('dev1 peak', r1.pk, rp.g(r1.A[r1.pk]), rp.g(r1.Rv[r1.pk]), 'start', rp.g(r1.alloc0), 'end', rp.g(r1.A[-1]), 'range', rp.m(max(r1.A)-min(r1.A)), rp.site(r1.T[r1.pk].get('frames',[])))
mx = max(r1.A); print('first index reaching max', r1.A.index(mx))
