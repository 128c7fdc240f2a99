// SPDX-License-Identifier: Apache-2.0
//
// A test's own CA, a server certificate for 127.0.0.1 and client certificates, made with
// .NET's CertificateRequest and written as PEM for ingestd (--tls-cert/--tls-key,
// --tls-client-ca). Valid for two days; ECDSA P-256.
using System.Net;
using System.Security.Cryptography;
using System.Security.Cryptography.X509Certificates;

namespace H3000.TestCommon;

public sealed class Pki
{
    public required X509Certificate2 Ca { get; init; }
    public required string CaPem { get; init; }
    public required string ServerPem { get; init; }
    public required string ServerKey { get; init; }

    public static Pki Create(string dir, string name = "ca")
    {
        Directory.CreateDirectory(dir);
        using var caKey = ECDsa.Create(ECCurve.NamedCurves.nistP256);
        var caReq = new CertificateRequest($"CN=h3000 test CA {name}", caKey, HashAlgorithmName.SHA256);
        caReq.CertificateExtensions.Add(new X509BasicConstraintsExtension(true, false, 0, true));
        caReq.CertificateExtensions.Add(new X509KeyUsageExtension(X509KeyUsageFlags.KeyCertSign | X509KeyUsageFlags.CrlSign, true));
        caReq.CertificateExtensions.Add(new X509SubjectKeyIdentifierExtension(caReq.PublicKey, false));
        X509Certificate2 ca = caReq.CreateSelfSigned(DateTimeOffset.UtcNow.AddHours(-1), DateTimeOffset.UtcNow.AddDays(2));
        string caPem = Path.Combine(dir, name + ".pem");
        File.WriteAllText(caPem, ca.ExportCertificatePem());
        var pki = new Pki { Ca = ca, CaPem = caPem, ServerPem = Path.Combine(dir, name + "-server.pem"), ServerKey = Path.Combine(dir, name + "-server.key") };
        pki.Issue("CN=127.0.0.1", pki.ServerPem, pki.ServerKey, server: true);
        return pki;
    }

    /// <summary>A certificate signed by this CA, written as PEM (cert, key); the certificate with its key.</summary>
    public X509Certificate2 Issue(string subject, string certPath, string keyPath, bool server)
    {
        using var key = ECDsa.Create(ECCurve.NamedCurves.nistP256);
        var req = new CertificateRequest(subject, key, HashAlgorithmName.SHA256);
        req.CertificateExtensions.Add(new X509BasicConstraintsExtension(false, false, 0, true));
        req.CertificateExtensions.Add(new X509KeyUsageExtension(X509KeyUsageFlags.DigitalSignature, true));
        req.CertificateExtensions.Add(new X509EnhancedKeyUsageExtension(
            [server ? new Oid("1.3.6.1.5.5.7.3.1") : new Oid("1.3.6.1.5.5.7.3.2")], false));
        if (server)
        {
            var san = new SubjectAlternativeNameBuilder();
            san.AddIpAddress(IPAddress.Loopback);
            san.AddDnsName("localhost");
            req.CertificateExtensions.Add(san.Build());
        }
        byte[] serial = RandomNumberGenerator.GetBytes(12);
        serial[0] &= 0x7f;
        using X509Certificate2 cert = req.Create(Ca, DateTimeOffset.UtcNow.AddMinutes(-30), DateTimeOffset.UtcNow.AddDays(1), serial);
        File.WriteAllText(certPath, cert.ExportCertificatePem());
        File.WriteAllText(keyPath, key.ExportPkcs8PrivateKeyPem());
        File.SetUnixFileMode(keyPath, UnixFileMode.UserRead | UnixFileMode.UserWrite);
        return X509Certificate2.CreateFromPem(cert.ExportCertificatePem(), key.ExportPkcs8PrivateKeyPem());
    }

    /// <summary>A server certificate check that trusts this CA only (and the name in the URL).</summary>
    public bool Validate(X509Certificate2? cert, System.Net.Security.SslPolicyErrors errors)
    {
        if (cert is null)
            return false;
        if ((errors & System.Net.Security.SslPolicyErrors.RemoteCertificateNameMismatch) != 0)
            return false;
        using var chain = new X509Chain();
        chain.ChainPolicy.TrustMode = X509ChainTrustMode.CustomRootTrust;
        chain.ChainPolicy.CustomTrustStore.Add(Ca);
        chain.ChainPolicy.RevocationMode = X509RevocationMode.NoCheck;
        return chain.Build(cert);
    }
}
