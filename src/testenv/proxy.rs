//! A TCP proxy for fault tests: listens on a loopback port, forwards every connection
//! byte for byte to a target (TLS passes through untouched, so a client keeps verifying
//! the target's certificate), counts the connections it accepted, and can cut every
//! established connection at once ([`TcpProxy::cut`]) — what a load balancer or a NAT
//! dropping its state does to long-lived watch streams. It runs on a thread and runtime
//! of its own, and stops when dropped.

use super::TestEnvError;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use tokio::sync::watch;

/// A running proxy.
pub struct TcpProxy {
    addr: SocketAddr,
    /// Bumped by [`Self::cut`]; every connection task ends when it changes.
    generation: watch::Sender<u64>,
    accepted: Arc<AtomicU64>,
    open: Arc<AtomicU64>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl TcpProxy {
    /// Starts forwarding `127.0.0.1:<free port>` to `target`.
    pub fn start(target: SocketAddr) -> Result<TcpProxy, TestEnvError> {
        let listener = std::net::TcpListener::bind("127.0.0.1:0")
            .map_err(|e| TestEnvError::Port(e.to_string()))?;
        let addr = listener
            .local_addr()
            .map_err(|e| TestEnvError::Port(e.to_string()))?;
        listener
            .set_nonblocking(true)
            .map_err(|e| TestEnvError::Port(e.to_string()))?;
        let (generation, _) = watch::channel(0u64);
        let accepted = Arc::new(AtomicU64::new(0));
        let open = Arc::new(AtomicU64::new(0));
        let (shutdown, stop) = tokio::sync::oneshot::channel();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| TestEnvError::Port(format!("proxy runtime: {e}")))?;
        let generations = generation.clone();
        let (acc, opn) = (accepted.clone(), open.clone());
        let thread = std::thread::spawn(move || {
            runtime.block_on(serve(listener, target, generations, acc, opn, stop));
        });
        Ok(TcpProxy {
            addr,
            generation,
            accepted,
            open,
            shutdown: Some(shutdown),
            thread: Some(thread),
        })
    }

    /// `127.0.0.1:<port>` of the proxy.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Closes every connection established so far (new ones are still accepted).
    pub fn cut(&self) {
        self.generation.send_modify(|g| *g += 1);
    }

    /// Connections accepted since the start.
    pub fn accepted(&self) -> u64 {
        self.accepted.load(Ordering::SeqCst)
    }

    /// Connections currently open.
    pub fn open(&self) -> u64 {
        self.open.load(Ordering::SeqCst)
    }
}

impl Drop for TcpProxy {
    fn drop(&mut self) {
        self.cut();
        if let Some(s) = self.shutdown.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

async fn serve(
    listener: std::net::TcpListener,
    target: SocketAddr,
    generation: watch::Sender<u64>,
    accepted: Arc<AtomicU64>,
    open: Arc<AtomicU64>,
    mut stop: tokio::sync::oneshot::Receiver<()>,
) {
    let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
        return;
    };
    loop {
        let (mut inbound, _) = tokio::select! {
            _ = &mut stop => return,
            conn = listener.accept() => match conn {
                Ok(c) => c,
                Err(_) => continue,
            },
        };
        accepted.fetch_add(1, Ordering::SeqCst);
        let mut changed = generation.subscribe();
        let open = open.clone();
        tokio::spawn(async move {
            open.fetch_add(1, Ordering::SeqCst);
            if let Ok(mut outbound) = tokio::net::TcpStream::connect(target).await {
                tokio::select! {
                    _ = changed.changed() => {}
                    _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => {}
                }
            }
            open.fetch_sub(1, Ordering::SeqCst);
            // Dropping both streams closes them: the client sees its connection end.
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test]
    async fn forwards_and_cuts() {
        let echo = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let target = echo.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = echo.accept().await {
                tokio::spawn(async move {
                    let mut buf = [0u8; 64];
                    while let Ok(n) = s.read(&mut buf).await {
                        if n == 0 || s.write_all(&buf[..n]).await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        let proxy = TcpProxy::start(target).unwrap();
        let mut c = tokio::net::TcpStream::connect(proxy.addr()).await.unwrap();
        c.write_all(b"ping").await.unwrap();
        let mut buf = [0u8; 4];
        c.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"ping");
        assert_eq!(proxy.accepted(), 1);
        proxy.cut();
        let n = tokio::time::timeout(std::time::Duration::from_secs(5), c.read(&mut buf))
            .await
            .expect("the cut connection ends")
            .unwrap_or(0);
        assert_eq!(n, 0, "the connection was closed");
        let mut again = tokio::net::TcpStream::connect(proxy.addr()).await.unwrap();
        again.write_all(b"pong").await.unwrap();
        again.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"pong");
        assert_eq!(proxy.accepted(), 2);
    }
}
