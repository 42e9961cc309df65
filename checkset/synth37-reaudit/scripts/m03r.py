import rp
d = rp.load('m03'); r = rp.R(d, 0); T = r.T
print('res at 4294', rp.g(r.Rv[4294]), 'max res before 4295', rp.g(max(r.Rv[:4295])), 'max alloc before 4295', rp.g(max(r.A[:4295])))
for i,e in enumerate(T[:4621]):
    if e['action']=='segment_alloc' and (i>4294 or i<90):
        fr=[(f['filename'].split('/')[-1], f['line'], f['name']) for f in e.get('frames',[])]
        print(i, rp.m(e['size']), 'A', rp.g(r.A[i]), 'R', rp.g(r.Rv[i]), fr[:5])
segs=[i for i,e in enumerate(T[:4621]) if e['action']=='segment_alloc']
print('n segalloc', len(segs), 'after 4294', sum(1 for i in segs if i>4294))
print('max segment size before 4295', rp.m(max([e['size'] for e in T[:4295] if e['action']=='segment_alloc'])))
print('segment sizes overall max before 4662', rp.g(max(e['size'] for e in T[:4662] if e['action']=='segment_alloc')))
