import pickle,sys,collections
from replay import load,final,curve
GiB=2**30;MiB=2**20
def userframe(fr):
    for f in fr or []:
        fn=f['filename']
        if 'site-packages' in fn or '/lib/python' in fn or fn.startswith('??') or fn=='' : continue
        if not fn.endswith('.py'): continue
        return '%s (%s:%d)'%(f['name'],fn.split('/')[-1],f['line'])
    return '<no stack>'
def start_live(d,dev):
    live={}
    for s in d['segments']:
        if s['device']!=dev: continue
        for b in s['blocks']:
            if b['state']=='active_allocated': live[b['address']]=(b['requested_size'],b.get('frames',[]),'final')
    t=d['device_traces'][dev]
    for e in reversed(t):
        if e['action']=='alloc': live.pop(e['addr'],None)
        elif e['action']=='free_completed': live[e['addr']]=(e['size'],[], 'ghost')
    return live
def live_at(d,dev,idx):
    live=start_live(d,dev); t=d['device_traces'][dev]
    for e in t[:idx+1]:
        if e['action']=='alloc': live[e['addr']]=(e['size'],e.get('frames',[]),idx)
        elif e['action']=='free_completed': live.pop(e['addr'],None)
    return live
def sites(live,n=6):
    c=collections.defaultdict(lambda:[0,0])
    for a,(sz,fr,_) in live.items():
        k=userframe(fr); c[k][0]+=sz; c[k][1]+=1
    for k,(b,nb) in sorted(c.items(),key=lambda x:-x[1][0])[:n]: print('   %-70s %.3f GiB %.1f MiB %d blocks'%(k,b/GiB,b/MiB,nb))
    big=sorted(live.values(),key=lambda x:-x[0])[:6]
    for sz,fr,_ in big: print('   big %.3f GiB %.1f MiB %s'%(sz/GiB,sz/MiB,userframe(fr)))
if __name__=='__main__':
    d=load(sys.argv[1]); dev=int(sys.argv[2]); idx=int(sys.argv[3])
    L=live_at(d,dev,idx); print('total',sum(v[0] for v in L.values()),len(L)); sites(L)
