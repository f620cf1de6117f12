# An application site added next to Debian's default one.
upstream app_backend {
	server 127.0.0.1:3000;
	server 127.0.0.1:3001;
	keepalive 8;
}

server {
	listen 80;
	listen [::]:80;
	server_name app.example.com www.app.example.com;
	return 301 https://$host$request_uri;
}

server {
	listen 443 ssl http2;
	listen [::]:443 ssl http2;
	server_name app.example.com www.app.example.com;

	ssl_certificate certs/app.crt;
	ssl_certificate_key certs/app.key;
	ssl_session_cache shared:SSL:10m;

	set_real_ip_from 10.0.0.0/8;
	real_ip_header X-Forwarded-For;

	client_max_body_size 8m;

	location / {
		proxy_pass http://app_backend;
		proxy_http_version 1.1;
		proxy_set_header Upgrade $http_upgrade;
		proxy_set_header Connection $connection_upgrade;
		proxy_set_header Host $host;
		proxy_set_header X-Forwarded-Proto $scheme;
	}

	location /api/ {
		proxy_pass http://app_backend;
		proxy_http_version 1.1;
		proxy_set_header Connection "";
		proxy_connect_timeout 3s;
		proxy_read_timeout 120s;
		client_max_body_size 50m;
	}

	location = /health {
		access_log off;
		proxy_pass http://app_backend;
	}

	location ~ /\.ht {
		deny all;
	}
}
