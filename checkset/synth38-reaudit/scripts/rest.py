from util import *
def steps(T, pred):
    return [i for i,e in enumerate(T) if e['action']=='alloc' and pred(e)]
def groups(ix, gap=50):
    if not ix: return []
    out=[ix[0]]
    for a,b in zip(ix,ix[1:]):
        if b-a>gap: out.append(b)
    return out
for stem,dev in [('m06',0),('m04',1),('m10',0)]:
    d=load(stem); r=Replay(d,dev); T=r.T
    print(stem, 'allocator_settings', d.get('allocator_settings'))
    opt=groups(steps(T, lambda e: any('/torch/optim/' in f['filename'] for f in e['frames'])), 30)
    b=[0]+opt+[len(T)]
    pk=[max(r.alloc_curve[a:c]) for a,c in zip(b,b[1:]) if c>a]
    lo=[min(r.alloc_curve[a:c]) for a,c in zip(b,b[1:]) if c>a]
    print(' nsteps', len(opt), 'peaks GiB', [round(x/GiB,2) for x in pk][:14], '...', [round(x/GiB,2) for x in pk][-4:])
    print(' lows GiB', [round(x/GiB,2) for x in lo][:4], '...', [round(x/GiB,2) for x in lo][-26:])
d=load('m06'); r=Replay(d,0); T=r.T
o=T[-1]; key=[(f['filename'],f['line']) for f in o['frames']]
same=[i for i,e in enumerate(T) if e['action']=='alloc' and e['size']==o['size'] and [(f['filename'],f['line']) for f in e['frames']]==key]
print('m06 same-stack same-size allocs', len(same), same[-20:])
sa=[i for i,e in enumerate(T) if e['action']=='segment_alloc' and i>18802]; print('m06 segallocs after 18802', len(sa), sa[:2])
