import rp, collections, lows
d = rp.load('m07'); r = rp.R(d, 0); T = r.T
print('peak', r.pk, rp.g(r.A[r.pk]), rp.g(r.Rv[r.pk]), 'gap', rp.m(r.Rv[r.pk]-r.A[r.pk]), (r.Rv[r.pk]-r.A[r.pk])/r.Rv[r.pk])
print(lows.count_lows(r.A, 146*2**20)[-4:])
live = r.live_at(r.pk)
by=collections.defaultdict(lambda:[0,0])
for sz,ai,fr in live: k=rp.site(fr); by[k][0]+=sz; by[k][1]+=1
for k,v in sorted(by.items(), key=lambda x:-x[1][0])[:8]: print(k, rp.m(v[0]), v[1])
print(sorted(sz for sz,ai,fr in live)[-3:])
print(collections.Counter(e['action'] for e in T))
